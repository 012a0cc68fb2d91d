import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { sha256Hex } from '../shared/ids.js';
import { IngestError } from '../gateway/problems.js';

/** Every admin call needs `Authorization: Bearer $ADMIN_TOKEN`; compared in constant time (over hashes). */
export function registerAdminAuth(app: FastifyInstance, adminToken: string): void {
  const expected = Buffer.from(sha256Hex(adminToken), 'hex');
  app.addHook('onRequest', async (request) => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
    const given = Buffer.from(sha256Hex(m?.[1] ?? ''), 'hex');
    if (!m || !timingSafeEqual(given, expected)) {
      throw new IngestError('unauthorized', 'Invalid or missing admin token.', { 'WWW-Authenticate': 'Bearer' });
    }
  });
}
