/**
 * The OpenAPI document and the routes agree: @fastify/swagger generates it from the registered routes, the
 * committed docs/openapi.json must equal that (regenerate with `make openapi`), and every route of the operator
 * contract is in it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { generateOpenApi } from '../bin/openapi.js';
import { repoRoot } from '../shared/repo-root.js';

const CONTRACT_ROUTES = [
  'POST /v1/events',
  'POST /v1/sgtm',
  'POST /admin/v1/workspaces',
  'PATCH /admin/v1/workspaces/{ws}',
  'POST /admin/v1/workspaces/{ws}/api-keys',
  'DELETE /admin/v1/workspaces/{ws}/api-keys/{id}',
  'PUT /admin/v1/workspaces/{ws}/forwarding',
  'POST /admin/v1/workspaces/{ws}/connection',
  'GET /admin/v1/workspaces/{ws}/connection',
  'DELETE /admin/v1/workspaces/{ws}/connection',
  'GET /oauth/callback',
  'POST /admin/v1/workspaces/{ws}/destinations',
  'GET /admin/v1/workspaces/{ws}/destinations',
  'GET /admin/v1/workspaces/{ws}/destinations/{id}',
  'PUT /admin/v1/workspaces/{ws}/destinations/{id}',
  'DELETE /admin/v1/workspaces/{ws}/destinations/{id}',
  'POST /admin/v1/workspaces/{ws}/destinations/{id}/connection',
  'GET /admin/v1/workspaces/{ws}/destinations/{id}/connection',
  'DELETE /admin/v1/workspaces/{ws}/destinations/{id}/connection',
  'GET /readyz',
  'GET /healthz',
];

describe('OpenAPI document', () => {
  it('the committed docs/openapi.json is what the routes generate', async () => {
    const committed = readFileSync(join(repoRoot(), 'docs', 'openapi.json'), 'utf8');
    expect(committed, 'run `make openapi` and commit docs/openapi.json').toBe(await generateOpenApi());
  });

  it('is OpenAPI 3.1, version 1.0.0, and holds every route of the operator contract', () => {
    const doc = JSON.parse(readFileSync(join(repoRoot(), 'docs', 'openapi.json'), 'utf8'));
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe('1.0.0');
    const operations = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    );
    for (const route of CONTRACT_ROUTES) expect(operations).toContain(route);
    // Both ingestion bodies are documented with the validators' own schemas.
    expect(doc.paths['/v1/events'].post.requestBody.content['application/json'].schema.items.required).toEqual([
      'event_name', 'event_source', 'event_data', 'event_metadata',
    ]);
    expect(doc.paths['/v1/sgtm'].post.responses['200']).toBeDefined();
  });
});
