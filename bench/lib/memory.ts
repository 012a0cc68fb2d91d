/**
 * Measuring a store's memory in a process of its own (node --expose-gc), for dedupe-memory and graph-memory: the
 * parent runs `bench/<script>.js <variant> <out.json>` pinned to the server's core; the child measures one variant and
 * writes its result to the file.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DIST, SERVER_CPU, spawnChild } from './proc.js';

/** Two full collections (the second frees what finalizers of the first released). */
export function fullGc(): void {
  const g = (globalThis as { gc?: () => void }).gc;
  if (!g) throw new Error('run with --expose-gc');
  g();
  g();
}

/** Runs `bench/<script>.js <variant> <out>` in a child with --expose-gc and answers what it wrote to `out`. */
export async function measureInChild<T>(script: string, variant: string): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), `bench-${script}-`));
  const out = join(dir, 'out.json');
  try {
    const child = spawnChild(SERVER_CPU, [process.execPath, '--expose-gc', '--max-old-space-size=8192', join(DIST, 'bench', `${script}.js`), variant, out], {});
    const code = await new Promise<number | null>((r) => child.child.once('exit', (c) => r(c)));
    if (code !== 0) throw new Error(`${script} (${variant}) failed:\n${child.output().slice(-3000)}`);
    return JSON.parse(readFileSync(out, 'utf8')) as T;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** In the child: when this process runs `script` with one of `variants`, measures it and exits. */
export function childMain<V extends string>(script: string, variants: readonly V[], measure: (variant: V, out: string) => Promise<void>): void {
  const variant = process.argv[2] as V;
  if (!process.argv[1]?.endsWith(`${script}.js`) || !variants.includes(variant)) return;
  measure(variant, process.argv[3]!).then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}
