#!/usr/bin/env bash
# The whole suite, as `make test` runs it: `npx vitest run` with the options given (options, not file filters: they
# apply to the second run below as well).
#
# A vitest 4 worker process sometimes dies under a test file without a failed test or an error of the file's own
# ("Worker exited unexpectedly"): the file's results are lost and the run fails. When that is the run's only failure,
# the files it hit (listed by test/helpers/unfinished-files-reporter.ts) run once more, on their own, and must pass
# there. A failed test or any other error fails the run at once, with no second run.
set -uo pipefail
cd "$(dirname "$0")/.."
list="$(mktemp)"
trap 'rm -f "$list"' EXIT
VITEST_UNFINISHED_LIST="$list" npx vitest run "$@"
rc=$?
if [[ $rc -ne 0 && -s "$list" ]]; then
  mapfile -t files <"$list"
  echo
  echo "run-suite: the only failure was a worker that died under ${files[*]}; running those files once more, on their own"
  npx vitest run "$@" "${files[@]}"
  rc=$?
fi
exit $rc
