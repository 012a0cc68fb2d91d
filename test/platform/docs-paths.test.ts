/**
 * The documents name only files that exist: every repository path in them (`services/…`, `test/…`, a path relative to
 * services/ such as `forwarder/sender.ts`, or a bare file name such as `main.ts`) resolves to a tracked file or
 * folder, a glob matches one, or git ignores it (a file made at run time, such as infra/local/.env).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { basename, join, matchesGlob } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../helpers/service-process.js';

const DOCS = ['README.md', 'bench/README.md', ...git('ls-files', 'docs/*.md')];
const TOP = new Set(['services', 'test', 'bench', 'docs', 'infra', 'clients', 'schemas', 'ops', 'patches']);
const EXT = 'ts|js|mjs|md|json|sql|avsc|sh|ya?ml|py|tpl|toml|java|patch';
/** Names that are not this repository's files: the project's design card, Kafka's tools, an npm package's file, a file
 * made in DATA_DIR, a pattern. */
const NOT_OURS = new Set(['DESIGN.md', 'Node.js', 'kafka-consumer-groups.sh', 'kafka-configs.sh', 'compose-spec.json', 'credentials.key', 'NNNN_name.sql', 'ctx.sql']);
/** decisions.md tells what replaced these. */
const GONE_ON_PURPOSE = new Set(['infra/docker-compose.yml', 'infra/docker/init.sh', 'init.sh']);

function git(...args: string[]): string[] {
  return execFileSync('git', args, { cwd: REPO_ROOT, encoding: 'utf8' }).split('\n').filter(Boolean);
}

const files = git('ls-files');
const known = new Set(files);
for (const f of files) for (let d = f; d.includes('/'); ) known.add((d = d.slice(0, d.lastIndexOf('/'))));
const names = new Set(files.map((f) => basename(f)));
const servicesDirs = new Set(files.filter((f) => f.startsWith('services/')).map((f) => f.split('/')[1]!));

const PATH = new RegExp(`(?<![\\w./@*+-])((?:[\\w.*+-]+/)+[\\w.*+-]*|[\\w.*+-]+\\.(?:${EXT}))(?![\\w/])`, 'g');

function resolves(token: string): boolean {
  const t = token.replace(/\/$/, '').replace(/^\.\//, '');
  // `test/integration/kafka-log` is the short form of the test file kafka-log.test.ts.
  const forms = [t, t.replace(/^dist\//, '').replace(/\.js$/, '.ts'), `services/${t}`, `services/${t.replace(/\.js$/, '.ts')}`, `${t}.test.ts`];
  if (forms.some((f) => known.has(f))) return true;
  if (t.includes('*')) return files.some((f) => forms.some((g) => matchesGlob(f, g)));
  if (!t.includes('/')) return names.has(t);
  const ignored = (() => {
    try {
      execFileSync('git', ['check-ignore', '-q', '--no-index', token], { cwd: REPO_ROOT });
      return true;
    } catch {
      return false;
    }
  })();
  return ignored;
}

/** Tokens that look like this repository's paths: under a top folder, under a services/ folder, or a file name. */
function repoPaths(text: string): Array<{ line: number; token: string }> {
  const out: Array<{ line: number; token: string }> = [];
  text.split('\n').forEach((line, i) => {
    for (const m of line.matchAll(PATH)) {
      const token = m[1]!.replace(/\.$/, '');
      if (/:\/\/|^www\./.test(line.slice(Math.max(0, m.index - 10), m.index + token.length))) continue;
      const first = token.replace(/^dist\//, '').split('/')[0]!;
      const isFile = new RegExp(`\\.(?:${EXT})$`).test(token);
      // A bare name needs a stem: `.test.ts` alone is a suffix, not a file.
      if (token.includes('/') ? !(TOP.has(first) || servicesDirs.has(first)) : !isFile || token.startsWith('.')) continue;
      if (NOT_OURS.has(basename(token)) || GONE_ON_PURPOSE.has(token)) continue;
      out.push({ line: i + 1, token });
    }
  });
  return out;
}

describe('documents name only files that exist', () => {
  it.each(DOCS)('%s', (doc) => {
    const missing = repoPaths(readFileSync(join(REPO_ROOT, doc), 'utf8'))
      .filter(({ token }) => !resolves(token))
      .map(({ line, token }) => `${doc}:${line} ${token}`);
    expect(missing).toEqual([]);
  });

  describe('bad input', () => {
    it.each(['services/forwarder/platform.ts', 'forwarder/platform.ts', 'services/bin/decode-cli.js', 'kafka-intake.ts', 'shared/kafka/fast-producer.ts'])(
      'reports %s',
      (token) => {
        expect(repoPaths(`see \`${token}\` for how`).map((p) => p.token)).toEqual([token]);
        expect(resolves(token)).toBe(false);
      },
    );
  });
});
