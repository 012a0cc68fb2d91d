/**
 * Schemathesis (a property-based API tester that generates requests from the OpenAPI document) against the
 * embedded default, with every check on: both ingestion endpoints, the admin API and the public pages answer as
 * docs/openapi.json says, for schema-valid and schema-breaking requests alike. The seed and the example count are in
 * schemathesis.toml (a few minutes here); `make test` installs the pinned Schemathesis into .tools/schemathesis.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type RunningService } from '../../services/compose/service.js';
import { loadConfig } from '../../services/shared/config.js';
import { silentLogger } from '../../services/shared/logger.js';
import { repoRoot } from '../../services/shared/repo-root.js';

const ADMIN = 'schemathesis-admin-token-0123456789';
const ST = join(repoRoot(), '.tools', 'schemathesis', 'bin', 'st');
const HERE = join(repoRoot(), 'test', 'schemathesis');

let service: RunningService;
let base: string;
let apiKey: string;
let workspaceId: string;

beforeAll(async () => {
  const config = loadConfig({
    ADMIN_TOKEN: ADMIN,
    PORT: '0',
    DATA_DIR: mkdtempSync(join(tmpdir(), 'schemathesis-')),
    PLATFORM_APP_ID: 'schemathesis-app',
    PLATFORM_APP_SECRET: 'schemathesis-secret',
    // The generated load is one worker's; the event-loop guard stays off as in the other in-process tests.
    GATEWAY_MAX_EVENT_LOOP_DELAY_MS: '0',
  });
  service = await startService(config, silentLogger);
  await service.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(service.app.server.address() as { port: number }).port}`;
  const auth = { authorization: `Bearer ${ADMIN}` };
  const ws = await service.app.inject({ method: 'POST', url: '/admin/v1/workspaces', headers: auth, payload: { name: 'schemathesis', plan: 'enterprise' } });
  const key = await service.app.inject({ method: 'POST', url: `/admin/v1/workspaces/${ws.json().id}/api-keys`, headers: auth, payload: { mode: 'live' } });
  apiKey = key.json().key;
  workspaceId = ws.json().id;
});
afterAll(async () => service?.close());

function run(args: string[], env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(ST, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

describe('Schemathesis', () => {
  it('finds nothing the document does not say, with every check', async () => {
    expect(existsSync(ST), `${ST} is missing: run \`make test\` (or \`make schemathesis\`) to install the pinned Schemathesis`).toBe(true);
    const { code, output } = await run(
      ['--config-file', join(HERE, 'schemathesis.toml'), 'run', `${base}/openapi.json`, '--no-shrink', '--output-truncate', 'false'],
      { ST_API_KEY: apiKey, ST_ADMIN_TOKEN: ADMIN, ST_WORKSPACE: workspaceId, ST_HOOKS: join(HERE, 'hooks.py'), NO_COLOR: '1', SCHEMATHESIS_TELEMETRY: 'false' },
    );
    const summary = output.slice(output.lastIndexOf('SUMMARY'));
    expect(code, output.length > 20_000 ? `${output.slice(0, 12_000)}\n…\n${summary}` : output).toBe(0);
  }, 600_000);
});
