/**
 * globalSetup of the integration project (vitest.config.ts): makes sure Kafka, the schema registry and Postgres
 * are up (given by KAFKA_BROKERS / SCHEMA_REGISTRY_URL / DATABASE_URL, or started by infra/local/up.sh) and
 * provides their addresses to the test files (infraEnv() in test/helpers/infra.ts). Nothing is stopped afterwards:
 * the next run finds them up (`make infra-down` stops them).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { ensureInfra, REPO_ROOT } from './infra.js';

export default async function setup(project: TestProject): Promise<void> {
  if (!existsSync(join(REPO_ROOT, 'dist', 'services', 'compose', 'main.js'))) {
    throw new Error('the integration tests run the built service: npx tsc -p tsconfig.dev.json first (make test does)');
  }
  project.provide('infra', await ensureInfra());
}
