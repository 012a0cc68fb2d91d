/**
 * When a test file's worker process dies (a fatal error, a signal, the kernel's OOM killer), vitest reports only
 * "Worker exited unexpectedly", without the file's name, and a CI log is read from its tail. This reporter prints,
 * after vitest's own summary, every file that started but never finished, with the test that was running in it and
 * how long it had run.
 *
 * With VITEST_UNFINISHED_LIST set, it also writes those files there, one a line, when they are the run's only
 * failure (no test failed, no other error): test/run-suite.sh then runs them once more, on their own.
 */
import { writeFileSync } from 'node:fs';
import type { SerializedError } from 'vitest';
import type { Reporter, TestCase, TestModule } from 'vitest/node';

/** The errors vitest reports for a worker process that ended under its file, and nothing else. */
const WORKER_DIED = /Worker exited unexpectedly|Worker forks emitted error/;
const workerDied = (e: SerializedError): boolean => WORKER_DIED.test(`${e.message} ${(e.cause as SerializedError | undefined)?.message ?? ''}`);

interface Running {
  /** When the file started; absent for a file that was queued and never started. */
  since?: number;
  test?: string;
}

export default class UnfinishedFilesReporter implements Reporter {
  readonly #running = new Map<string, Running>();

  onTestModuleStart(module: TestModule): void {
    this.#running.set(module.moduleId, { since: Date.now() });
  }

  onTestCaseReady(test: TestCase): void {
    const running = this.#running.get(test.module.moduleId);
    if (running) running.test = test.fullName;
  }

  onTestModuleEnd(module: TestModule): void {
    this.#running.delete(module.moduleId);
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>, errors: ReadonlyArray<SerializedError>): void {
    const unfinished = new Map(this.#running);
    for (const module of modules) {
      const state = module.state();
      if ((state === 'queued' || state === 'pending') && !unfinished.has(module.moduleId)) unfinished.set(module.moduleId, {});
    }
    if (unfinished.size === 0) return;
    const lines = [...unfinished].map(([file, run]) => {
      const ran = run.since === undefined ? 'never started' : `ran ${((Date.now() - run.since) / 1000).toFixed(0)} s`;
      return `  ${file.replace(`${process.cwd()}/`, '')} (${ran}; last test started: ${run.test ?? 'none'})`;
    });
    process.stdout.write(`\nTest files that did not finish (their worker ended under them):\n${lines.join('\n')}\n`);
    const list = process.env.VITEST_UNFINISHED_LIST;
    const onlyThat = modules.every((m) => m.state() !== 'failed') && errors.every(workerDied);
    if (list && onlyThat) writeFileSync(list, [...unfinished.keys()].map((f) => `${f}\n`).join(''));
  }
}
