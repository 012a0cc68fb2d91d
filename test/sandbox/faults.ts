import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { messageFor, PlatformCode } from './codes.js';
import { sendApi } from './respond.js';
import { FAULT_KEYS, type Fault, type FaultKey, type SandboxState } from './state.js';

export type ParsedFaults = { ok: true; faults: Partial<Record<FaultKey, Fault[]>> } | { ok: false; error: string };

const MAX_DELAY_MS = 120_000;

function isInt(v: unknown, min: number, max: number): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;
}

function parseFault(raw: unknown, where: string): Fault | string {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return `${where}: must be an object`;
  const r = raw as Record<string, unknown>;
  const known = new Set(['http_status', 'code', 'message', 'delay_ms', 'retry_after', 'times', 'event_source_id']);
  for (const key of Object.keys(r)) if (!known.has(key)) return `${where}.${key}: unknown key`;
  const fault: Fault = { times: 1 };
  if (r.times !== undefined) {
    if (!isInt(r.times, 1, 1_000_000)) return `${where}.times: must be a positive integer`;
    fault.times = r.times;
  }
  if (r.http_status !== undefined) {
    if (!isInt(r.http_status, 100, 599)) return `${where}.http_status: must be an HTTP status code`;
    fault.http_status = r.http_status;
  }
  if (r.code !== undefined) {
    if (!isInt(r.code, 1, Number.MAX_SAFE_INTEGER)) return `${where}.code: must be a nonzero positive integer`;
    fault.code = r.code;
  }
  if (r.message !== undefined) {
    if (typeof r.message !== 'string') return `${where}.message: must be a string`;
    fault.message = r.message;
  }
  if (r.delay_ms !== undefined) {
    if (!isInt(r.delay_ms, 0, MAX_DELAY_MS)) return `${where}.delay_ms: must be an integer 0..${MAX_DELAY_MS}`;
    fault.delay_ms = r.delay_ms;
  }
  if (r.retry_after !== undefined) {
    if (!isInt(r.retry_after, 0, 86_400)) return `${where}.retry_after: must be whole seconds`;
    fault.retry_after = r.retry_after;
  }
  if (r.event_source_id !== undefined) {
    if (typeof r.event_source_id !== 'string' || r.event_source_id === '') return `${where}.event_source_id: must be a non-empty string`;
    fault.event_source_id = r.event_source_id;
  }
  if (fault.http_status === undefined && fault.code === undefined && fault.delay_ms === undefined) {
    return `${where}: needs at least one of http_status, code, delay_ms`;
  }
  return fault;
}

/** Validate a POST /_control/faults body: `{ events?: Fault[], refresh?: Fault[], ... }`. */
export function parseFaults(body: unknown): ParsedFaults {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return { ok: false, error: 'body must be an object' };
  const out: Partial<Record<FaultKey, Fault[]>> = {};
  for (const [key, list] of Object.entries(body as Record<string, unknown>)) {
    if (!(FAULT_KEYS as readonly string[]).includes(key)) {
      return { ok: false, error: `${key}: unknown endpoint key (expected one of ${FAULT_KEYS.join(', ')})` };
    }
    if (!Array.isArray(list)) return { ok: false, error: `${key}: must be an array of faults` };
    const parsed: Fault[] = [];
    for (const [i, raw] of list.entries()) {
      const f = parseFault(raw, `${key}[${i}]`);
      if (typeof f === 'string') return { ok: false, error: f };
      parsed.push(f);
    }
    out[key as FaultKey] = parsed;
  }
  return { ok: true, faults: out };
}

export function enqueueFaults(state: SandboxState, faults: Partial<Record<FaultKey, Fault[]>>): void {
  for (const key of FAULT_KEYS) state.faults[key].push(...(faults[key] ?? []).map((f) => ({ ...f })));
}

/** The first queued fault that applies to this call (a fault for one event source skips the others' calls). */
function takeFault(state: SandboxState, key: FaultKey, request: FastifyRequest): Fault | undefined {
  const queue = state.faults[key];
  const source = (request.body as { event_source_id?: unknown } | undefined)?.event_source_id;
  const i = queue.findIndex((f) => f.event_source_id === undefined || f.event_source_id === source);
  const head = queue[i];
  if (!head) return undefined;
  head.times -= 1;
  if (head.times <= 0) queue.splice(i, 1);
  return head;
}

function defaultCodeFor(httpStatus: number): number {
  if (httpStatus === 429) return PlatformCode.TOO_MANY_REQUESTS;
  if (httpStatus === 503) return PlatformCode.SERVICE_UNAVAILABLE;
  return PlatformCode.SYSTEM_ERROR;
}

/**
 * Apply the next queued fault of an endpoint, if any. A delay-only fault waits and lets the call proceed normally
 * (so the work still happens after the client may have timed out). Returns true when the fault answered the call.
 */
export async function applyFault(
  state: SandboxState,
  key: FaultKey,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<boolean> {
  const fault = takeFault(state, key, request);
  if (!fault) return false;
  if (fault.delay_ms) {
    state.delayed[key] = (state.delayed[key] ?? 0) + 1;
    try {
      await sleep(fault.delay_ms);
    } finally {
      state.delayed[key]! -= 1;
    }
  }
  if (fault.http_status === undefined && fault.code === undefined) return false;
  const httpStatus = fault.http_status ?? 200;
  const code = fault.code ?? defaultCodeFor(httpStatus);
  const headers: Record<string, string> = {};
  if (fault.retry_after !== undefined) headers['retry-after'] = String(fault.retry_after);
  sendApi(state, request, reply, {
    code,
    message: fault.message ?? messageFor(code),
    httpStatus,
    endpoint: key,
    fault: true,
    headers,
  });
  return true;
}
