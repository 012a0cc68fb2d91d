/**
 * Setup file of every test worker: a worker that exits with a non-zero code under a test file (something in the
 * process called process.exit, or a fatal error) says which file and from where, on stderr, before it goes.
 */
import { expect } from 'vitest';

const file = expect.getState().testPath ?? 'an unknown test file';

process.once('exit', (code) => {
  if (code === 0) return;
  process.stderr.write(`\n[test worker ${process.pid}] exiting with code ${code} while running ${file}\n${new Error('exit').stack ?? ''}\n`);
});
