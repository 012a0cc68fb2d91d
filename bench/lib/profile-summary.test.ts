import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { summariseThreads } from './profile-summary.js';

/** A profile of one function under the root, sampled `samples` times 1 ms apart. */
function profile(functionName: string, url: string, samples: number): string {
  return JSON.stringify({
    nodes: [
      { id: 1, callFrame: { functionName: '(root)', url: '', lineNumber: -1, columnNumber: -1 }, children: [2] },
      { id: 2, callFrame: { functionName, url, lineNumber: 0, columnNumber: 0 } },
    ],
    startTime: 0,
    endTime: samples * 1000,
    samples: Array.from({ length: samples }, () => 2),
    timeDeltas: Array.from({ length: samples }, () => 1000),
  });
}

describe('summariseThreads: a process profiled thread by thread (node --cpu-prof without a name)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'profiles-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('the main thread first, then the others; the one running WebAssembly named as the embedded store', () => {
    const files = {
      store: join(dir, 'CPU.20261128.160000.4242.1.002.cpuprofile'),
      main: join(dir, 'CPU.20261128.160000.4242.0.001.cpuprofile'),
      other: join(dir, 'CPU.20261128.160000.4242.7.003.cpuprofile'),
    };
    writeFileSync(files.store, profile('wasm-function[10737]', 'wasm://wasm/022a9842', 40));
    writeFileSync(files.main, profile('step', 'file:///repo/dist/services/stream/embedded/runner.js', 20));
    writeFileSync(files.other, profile('flush', 'file:///repo/node_modules/pino/lib/worker.js', 5));

    const page = summariseThreads([files.store, files.other, files.main], 'pipeline-embedded');
    const titles = page.split('\n').filter((l) => l.startsWith('## '));
    expect(titles).toEqual([
      '## pipeline-embedded: the main thread',
      "## pipeline-embedded: the embedded store's thread (PGlite: Postgres compiled to WebAssembly)",
      '## pipeline-embedded: worker thread 7',
    ]);
    const store = page.slice(page.indexOf(titles[1]!), page.indexOf(titles[2]!));
    expect(store).toContain('| WebAssembly | 39 | 100 |');
  });
});
