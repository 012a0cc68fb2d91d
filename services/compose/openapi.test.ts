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

  it('documents every error as a problem document (endpoint B and the browser pages in their own formats), and 204s without a body', () => {
    const doc = JSON.parse(readFileSync(join(repoRoot(), 'docs', 'openapi.json'), 'utf8'));
    for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, { responses: Record<string, { content?: object }> }>>)) {
      for (const [method, op] of Object.entries(ops)) {
        const codes = Object.keys(op.responses);
        expect(codes.some((c) => c.startsWith('2') || c.startsWith('3')), `${method} ${path} has a success answer`).toBe(true);
        expect(codes, `${method} ${path}`).toContain('500');
        if (path.startsWith('/admin/')) expect(codes, `${method} ${path}`).toContain('401');
        for (const [code, answer] of Object.entries(op.responses)) {
          if (!code.startsWith('4') && !code.startsWith('5')) continue;
          const types = Object.keys(answer.content ?? {});
          if (path === '/readyz' && code === '503') continue; // {"status": "not ready"}: what probes read
          if (path === '/v1/sgtm') expect(types, `${method} ${path} ${code}`).toEqual(['application/json']);
          else if (path.startsWith('/oauth/')) expect(types.every((t) => t === 'text/html' || t === 'application/problem+json'), `${method} ${path} ${code}`).toBe(true);
          else expect(types, `${method} ${path} ${code}`).toEqual(['application/problem+json']);
        }
      }
    }
    expect(Object.keys(doc.paths['/admin/v1/workspaces/{ws}/api-keys/{id}'].delete.responses)).toContain('204');
  });
});
