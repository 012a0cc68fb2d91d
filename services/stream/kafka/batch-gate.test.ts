import { describe, expect, it } from 'vitest';
import { BatchGate } from './batch-gate.js';

/** A step that finishes when told: the tests order events without timers. */
function step() {
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  return { finished, done };
}

describe('BatchGate', () => {
  it('runs batches together, and a punctuator only once every batch in flight has finished', async () => {
    const gate = new BatchGate();
    const log: string[] = [];
    const a = step();
    const b = step();
    const batchA = gate.batch(async () => { log.push('a starts'); await a.finished; log.push('a ends'); });
    const batchB = gate.batch(async () => { log.push('b starts'); await b.finished; log.push('b ends'); });
    const punctuate = gate.alone(async () => void log.push('punctuate'));
    await Promise.resolve();
    expect(log).toEqual(['a starts', 'b starts']);
    a.done();
    await batchA;
    expect(log).not.toContain('punctuate');
    b.done();
    await Promise.all([batchB, punctuate]);
    expect(log).toEqual(['a starts', 'b starts', 'a ends', 'b ends', 'punctuate']);
  });

  it('holds a batch that starts while a punctuator runs until it has finished', async () => {
    const gate = new BatchGate();
    const log: string[] = [];
    const p = step();
    const punctuate = gate.alone(async () => { log.push('punctuate starts'); await p.finished; log.push('punctuate ends'); });
    const batch = gate.batch(async () => void log.push('batch'));
    await Promise.resolve();
    expect(log).toEqual(['punctuate starts']);
    p.done();
    await Promise.all([punctuate, batch]);
    expect(log).toEqual(['punctuate starts', 'punctuate ends', 'batch']);
  });

  it('releases the gate when a punctuator or a batch throws', async () => {
    const gate = new BatchGate();
    await expect(gate.alone(async () => { throw new Error('punctuator failed'); })).rejects.toThrow('punctuator failed');
    await expect(gate.batch(async () => { throw new Error('batch failed'); })).rejects.toThrow('batch failed');
    await expect(gate.alone(async () => undefined)).resolves.toBeUndefined();
    await expect(gate.batch(async () => 7)).resolves.toBe(7);
  });
});
