// The run-suite test's own vitest project: the cases in this folder only, with the suite's reporter.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    root: import.meta.dirname,
    include: ['*.case.ts'],
    pool: 'forks',
    reporters: ['default', '../../helpers/unfinished-files-reporter.ts'],
  },
});
