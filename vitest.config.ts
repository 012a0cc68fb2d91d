import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // A worker that dies under a file is named at the end of the run (vitest itself does not say which).
    reporters: ['default', './test/helpers/unfinished-files-reporter.ts'],
    setupFiles: ['./test/helpers/worker-exit-trace.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['services/**/*.test.ts', 'test/**/*.test.ts', 'bench/**/*.test.ts'],
          exclude: [...configDefaults.exclude, 'test/integration/**'],
        },
      },
      {
        // The sender kit (clients/): its own packages, tested against the real service (built dist/, as make test does).
        extends: true,
        test: {
          name: 'clients',
          include: ['clients/*/test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, 'clients/*/node_modules/**'],
        },
      },
      {
        // Real Kafka, registry and Postgres (started by the globalSetup when not given). The files share the broker's
        // topics: they run one at a time, after the unit project.
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/helpers/global-setup.ts'],
          fileParallelism: false,
          testTimeout: 120_000,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
