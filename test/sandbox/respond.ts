import type { FastifyReply, FastifyRequest } from 'fastify';
import { messageFor, PlatformCode } from './codes.js';
import { isoAt, nextRequestId, type FaultKey, type SandboxState } from './state.js';

/** Every platform answer has this shape; a nonzero code is an error even under HTTP 200. */
export interface Envelope<T = Record<string, unknown>> {
  code: number;
  message: string;
  request_id: string;
  data: T;
}

export interface ApiAnswer {
  code?: number;
  message?: string;
  data?: Record<string, unknown>;
  httpStatus?: number;
  endpoint: FaultKey | 'authorize' | null;
  fault?: boolean;
  headers?: Record<string, string>;
  /** Use this request id instead of a fresh one (when the id was needed before answering). */
  requestId?: string;
}

export function requestPath(request: FastifyRequest): string {
  const q = request.url.indexOf('?');
  return q === -1 ? request.url : request.url.slice(0, q);
}

export function logCall(
  state: SandboxState,
  request: FastifyRequest,
  entry: { code: number | null; http_status: number; endpoint: FaultKey | 'authorize' | null; fault?: boolean },
): void {
  state.calls.push({
    path: requestPath(request),
    method: request.method,
    at: isoAt(state),
    code: entry.code,
    http_status: entry.http_status,
    endpoint: entry.endpoint,
    fault: entry.fault ?? false,
  });
}

/** Answer a platform API call with the JSON envelope and record it in the call log. */
export function sendApi(state: SandboxState, request: FastifyRequest, reply: FastifyReply, answer: ApiAnswer): FastifyReply {
  const code = answer.code ?? PlatformCode.OK;
  const httpStatus = answer.httpStatus ?? 200;
  const requestId = answer.requestId ?? nextRequestId(state);
  const body: Envelope = {
    code,
    message: answer.message ?? messageFor(code),
    request_id: requestId,
    data: answer.data ?? {},
  };
  logCall(state, request, { code, http_status: httpStatus, endpoint: answer.endpoint, fault: answer.fault });
  reply.code(httpStatus).header('x-tt-logid', requestId);
  for (const [name, value] of Object.entries(answer.headers ?? {})) reply.header(name, value);
  return reply.type('application/json; charset=utf-8').send(body);
}
