import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { API_PREFIX, PlatformCode } from './codes.js';
import { applyFault } from './faults.js';
import { authenticate } from './oauth.js';
import { sendApi } from './respond.js';
import type { SandboxState } from './state.js';

/** Parse the `advertiser_ids` query parameter: a JSON array of ids, e.g. `["7000000000000000001"]`. */
export function parseAdvertiserIds(raw: unknown): string[] | string {
  if (typeof raw !== 'string' || raw.length === 0) return 'advertiser_ids: required';
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return 'advertiser_ids: must be a JSON array of advertiser ids';
  }
  if (!Array.isArray(parsed) || parsed.length === 0 || parsed.length > 100) {
    return 'advertiser_ids: must be a JSON array of 1..100 advertiser ids';
  }
  const ids: string[] = [];
  for (const v of parsed) {
    if (typeof v === 'string' && /^\d+$/.test(v)) ids.push(v);
    else if (typeof v === 'number' && Number.isSafeInteger(v) && v > 0) ids.push(String(v));
    else return 'advertiser_ids: every id must be a numeric string';
  }
  return ids;
}

async function advertiserInfo(state: SandboxState, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const endpoint = 'advertiser' as const;
  if (await applyFault(state, endpoint, request, reply)) return reply;
  const auth = authenticate(state, request.headers['access-token']);
  if (!auth.ok) return sendApi(state, request, reply, { endpoint, code: auth.code });
  const ids = parseAdvertiserIds((request.query as Record<string, unknown>).advertiser_ids);
  if (typeof ids === 'string') return sendApi(state, request, reply, { endpoint, code: PlatformCode.PARAM_ERROR, message: ids });
  const foreign = ids.find((id) => !auth.grant.advertiser_ids.includes(id));
  if (foreign !== undefined) {
    return sendApi(state, request, reply, {
      endpoint,
      code: PlatformCode.NO_PERMISSION,
      message: `No permission to operate advertiser ${foreign}.`,
    });
  }
  const list = ids.map((id) => ({
    advertiser_id: id,
    name: auth.grant.advertiser_ids.indexOf(id) === 0 ? state.advertiserName : `${state.advertiserName} ${id}`,
    timezone: state.settings.timezone,
    display_timezone: state.settings.timezone,
    currency: 'USD',
    country: 'US',
    status: 'STATUS_ENABLE',
    role: 'ROLE_ADVERTISER',
    company: 'Sandbox Inc.',
    create_time: Math.floor(auth.grant.created_at / 1000),
  }));
  return sendApi(state, request, reply, { endpoint, data: { list } });
}

export function registerAdvertiserRoutes(app: FastifyInstance, state: SandboxState): void {
  app.get(`${API_PREFIX}/advertiser/info/`, async (request, reply) => advertiserInfo(state, request, reply));
}
