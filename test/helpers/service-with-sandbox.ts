/**
 * The whole service in this process, listening on loopback, with a platform sandbox: the embedded default in memory,
 * or the runtime that `env` selects (KAFKA_BROKERS, SCHEMA_REGISTRY_URL, DATABASE_URL, KAFKA_GROUP_PREFIX).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startService, type RunningService } from '../../services/compose/service.js';
import { loadConfig } from '../../services/shared/config.js';
import { silentLogger } from '../../services/shared/logger.js';
import { freePort } from '../sandbox/ports.js';
import { startSandbox, type RunningSandbox } from '../sandbox/server.js';
import { adminClient, type AdminClient } from './admin-client.js';
import { SANDBOX_APP } from './forwarder-rig.js';

export interface ServiceWithSandbox {
  readonly sandbox: RunningSandbox;
  readonly service: RunningService;
  readonly url: string;
  readonly admin: AdminClient;
  close(): Promise<void>;
}

export async function startServiceWithSandbox(adminToken: string, env: Record<string, string> = {}): Promise<ServiceWithSandbox> {
  const sandbox = await startSandbox({ port: 0 });
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const config = loadConfig({
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: mkdtempSync(join(tmpdir(), 'svc-sandbox-')),
    ADMIN_TOKEN: adminToken,
    PUBLIC_BASE_URL: url,
    CREDENTIALS_KEY: randomBytes(32).toString('base64'),
    PLATFORM_API_BASE: sandbox.apiBase,
    PLATFORM_AUTH_URL: sandbox.authUrl,
    PLATFORM_APP_ID: SANDBOX_APP.id,
    PLATFORM_APP_SECRET: SANDBOX_APP.secret,
    FORWARDER_LINGER_MS: '20',
    FORWARDER_RETRY_BASE_MS: '30',
    FORWARDER_RETRY_MAX_MS: '300',
    LOG_LEVEL: 'silent',
    GATEWAY_MAX_EVENT_LOOP_DELAY_MS: '0',
    ...env,
  });
  const service = await startService(config, silentLogger, { inMemoryDb: !env.DATABASE_URL });
  await service.app.listen({ port, host: '127.0.0.1' });
  return {
    sandbox,
    service,
    url,
    admin: adminClient(url, adminToken),
    async close() {
      await service.close();
      await sandbox.close();
    },
  };
}
