/**
 * Writes docs/openapi.json from the routes of the whole service (all roles), exactly as /openapi.json serves it.
 * `make openapi` runs it; a test fails when the committed document differs from what the routes say.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { loadConfig } from '../shared/config.js';
import { silentLogger } from '../shared/logger.js';
import { repoRoot } from '../shared/repo-root.js';
import { startService } from '../compose/service.js';
import { takeNoArguments } from './cli/args.js';

export async function generateOpenApi(): Promise<string> {
  const config = loadConfig({
    ADMIN_TOKEN: 'openapi-generation-token',
    DATA_DIR: mkdtempSync(join(tmpdir(), 'openapi-')),
    PLATFORM_APP_ID: 'app',
    PLATFORM_APP_SECRET: 'secret',
  });
  const service = await startService(config, silentLogger, { inMemoryDb: true });
  try {
    await service.app.ready();
    return JSON.stringify(service.app.swagger(), null, 2) + '\n';
  } finally {
    await service.close();
  }
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  takeNoArguments('usage: node dist/services/bin/openapi.js   (writes docs/openapi.json from the routes)');
  const text = await generateOpenApi();
  writeFileSync(join(repoRoot(), 'docs', 'openapi.json'), text);
  process.stdout.write('wrote docs/openapi.json\n');
}
