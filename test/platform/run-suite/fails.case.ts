// A test that fails: run only when RUN_SUITE_FAIL is set.
import { expect, it } from 'vitest';

it.runIf(process.env.RUN_SUITE_FAIL === '1')('fails', () => {
  expect(1).toBe(2);
});
