/**
 * Overload shedding for the ingestion routes: past what this process can answer within the deadline,
 * a request gets a fast 503 with `Retry-After` instead of a place in a queue that answers it seconds late.
 * - Event-loop pressure: @fastify/under-pressure samples the event-loop delay and utilisation; past
 *   GATEWAY_MAX_EVENT_LOOP_DELAY_MS or GATEWAY_MAX_EVENT_LOOP_UTILIZATION, new ingestion requests are shed.
 * - Bounded in-flight work: at most GATEWAY_MAX_IN_FLIGHT ingestion requests (lowered while answers are slow:
 *   AdaptiveLimit) and GATEWAY_MAX_IN_FLIGHT_BYTES of their declared bodies per process. The bytes bound is what
 *   keeps the deadline, because a request's CPU grows with its events (docs/decisions.md, "Issue 14: hardening").
 * Shedding runs first in the scope's onRequest chain, before the key lookup and the body, so a shed costs almost
 * nothing. Health, metrics and the admin API are outside this scope: never shed. Each shed marks ingestion pressure
 * (shared/pressure.ts), on which the embedded stages yield.
 */
import underPressure from '@fastify/under-pressure';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Counter, Gauge } from 'prom-client';
import { registry } from '../shared/metrics.js';
import { markIngestPressure } from '../shared/ingest-pressure.js';
import { sleep } from '../shared/sleep.js';
import { IngestError } from './problems.js';

export interface OverloadLimits {
  readonly maxInFlight: number;
  readonly maxInFlightBytes: number;
  readonly maxEventLoopDelayMs: number;
  readonly maxEventLoopUtilization: number;
}

/** Seconds a shed client should wait: short, the pressure is usually gone quickly. */
export const SHED_RETRY_AFTER_SECONDS = 1;

/**
 * How long the 503 is held for a connection shed less than Retry-After ago: a client that ignores Retry-After
 * otherwise turns shedding into the whole load. Bounds such a connection to 1,000/HOLD requests a second and still
 * answers inside the deadline; a client that waits as told, or a new connection, is never held.
 */
export const SHED_HOLD_MS = 500;

export const shedRequests = new Counter({
  name: 'gateway_shed_requests_total',
  help: 'Ingestion requests answered 503 because the process was overloaded, by reason (at once, or held: gateway_shed_held_total)',
  labelNames: ['reason'] as const,
  registers: [registry],
});

export const shedHeld = new Counter({
  name: 'gateway_shed_held_total',
  help: `Shed requests whose 503 was held ${SHED_HOLD_MS} ms: their connection was shed less than Retry-After before`,
  registers: [registry],
});

/** What a request without Content-Length (chunked) counts against GATEWAY_MAX_IN_FLIGHT_BYTES. */
export const UNDECLARED_BODY_BYTES = 65_536;

export const inFlightLimit = new Gauge({
  name: 'gateway_in_flight_limit',
  help: 'Ingestion requests this process takes at once now: GATEWAY_MAX_IN_FLIGHT, lowered while answers are slow',
  registers: [registry],
});

/**
 * The in-flight bound, adapted to how fast this process answers (AIMD, as TCP's congestion window): the static
 * bounds admit what an idle machine could do, and under overload admitted requests would queue past the deadline.
 * Every window, if more than a tenth of the answers took longer than the target, the limit shrinks by a quarter; if
 * none did and the limit was reached, it grows by a tenth (at least one).
 */
export class AdaptiveLimit {
  private value: number;
  private windowStart: number;
  private windowSlow = 0;
  private windowServed = 0;
  private windowPeak = 0;

  constructor(
    private readonly opts: { readonly min: number; readonly max: number; readonly targetMs: number; readonly windowMs: number },
    private readonly now: () => number = Date.now,
  ) {
    this.value = opts.max;
    this.windowStart = now();
  }

  /** How many requests may be in progress now. */
  get limit(): number {
    this.roll();
    return Math.floor(this.value);
  }

  /** A request was admitted; `inFlight` counts it. */
  admitted(inFlight: number): void {
    this.windowPeak = Math.max(this.windowPeak, inFlight);
  }

  /** An admitted request was answered after `ms`. */
  served(ms: number): void {
    this.roll();
    this.windowServed++;
    if (ms > this.opts.targetMs) this.windowSlow++;
  }

  private roll(): void {
    const now = this.now();
    if (now - this.windowStart < this.opts.windowMs) return;
    const { min, max } = this.opts;
    // More than a tenth of the window's answers late (at least one): too many admitted.
    if (this.windowSlow > Math.max(0, Math.floor(this.windowServed / 10))) this.value = Math.max(min, this.value * 0.75);
    else if (this.windowServed > 0 && this.windowPeak >= Math.floor(this.value)) this.value = Math.min(max, this.value + Math.max(1, this.value * 0.1));
    this.windowStart = now;
    this.windowSlow = 0;
    this.windowServed = 0;
    this.windowPeak = 0;
  }
}

/** The answer time the adaptive limit keeps admitted requests under: well inside the deadline, which the client's
 * own wait (its bytes queued in the kernel while the process is busy) also counts against. */
export const ADAPTIVE_TARGET_SHARE = 0.5;

export const inFlightRequests = new Gauge({
  name: 'gateway_in_flight_requests',
  help: 'Ingestion requests being handled by this process',
  registers: [registry],
});

/** When each connection was last shed (its socket; the process-wide mark is shared/pressure.ts). */
const lastShedAt = new WeakMap<object, number>();

/** Sheds a request: the 503 at once, or after SHED_HOLD_MS if its connection ignored the Retry-After of its last one. */
async function shed(request: FastifyRequest, reason: string, detail: string): Promise<never> {
  const socket = request.raw.socket;
  const now = Date.now();
  const last = lastShedAt.get(socket);
  lastShedAt.set(socket, now);
  if (last !== undefined && now - last < SHED_RETRY_AFTER_SECONDS * 1_000) {
    shedHeld.inc();
    await sleep(SHED_HOLD_MS);
  }
  throw shedError(reason, detail);
}

function shedError(reason: string, detail: string): IngestError {
  shedRequests.inc({ reason });
  markIngestPressure();
  // A shed is an answer, not a fault: no stack is captured, as that costs real time thousands of times a second.
  const stackFrames = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return new IngestError('overloaded', detail, { 'Retry-After': String(SHED_RETRY_AFTER_SECONDS) });
  } finally {
    Error.stackTraceLimit = stackFrames;
  }
}

export async function registerOverloadShedding(app: FastifyInstance, limits: OverloadLimits, deadlineMs: number): Promise<void> {
  // First in the scope's onRequest chain: event-loop pressure (the library), then the in-flight bound.
  await app.register(underPressure, {
    maxEventLoopDelay: limits.maxEventLoopDelayMs,
    maxEventLoopUtilization: limits.maxEventLoopUtilization,
    eventLoopUtilizationMode: 'interval',
    sampleInterval: 100,
    pressureHandler: async (request, _reply, type, value) => {
      // NOTE: the library reports a delay of Infinity for a window without a single sample (the loop was blocked
      // all of it, e.g. by start-up work just before the first requests). That is no measurement: let it pass;
      // the window after a real stall holds its long sample and sheds.
      if (type === 'eventLoopDelay' && value === Infinity) return;
      const measured = typeof value === 'number' ? ` (${type} ${Math.round(value * 1000) / 1000})` : '';
      await shed(request, type, `the service is overloaded${measured}; retry in ${SHED_RETRY_AFTER_SECONDS} s`);
    },
  });
  let inFlight = 0;
  let inFlightBytes = 0;
  const counted = new WeakMap<object, { readonly bytes: number; readonly at: number }>();
  const adaptive = new AdaptiveLimit({ min: Math.min(2, limits.maxInFlight), max: limits.maxInFlight, targetMs: deadlineMs * ADAPTIVE_TARGET_SHARE, windowMs: 200 });
  inFlightLimit.set(limits.maxInFlight);
  app.addHook('onRequest', async (request, reply) => {
    const limit = adaptive.limit;
    inFlightLimit.set(limit);
    if (inFlight >= limit) {
      await shed(request, 'in_flight', `the service is at its limit of ${limit} requests in progress; retry in ${SHED_RETRY_AFTER_SECONDS} s`);
    }
    const declared = Number(request.headers['content-length']);
    const bytes = Number.isSafeInteger(declared) && declared >= 0 ? declared : UNDECLARED_BODY_BYTES;
    // One request alone is always taken (the body limit bounds it); past that, the bytes bound decides.
    if (inFlight > 0 && inFlightBytes + bytes > limits.maxInFlightBytes) {
      await shed(request, 'in_flight_bytes', `the service is at its limit of ${limits.maxInFlightBytes} bytes of requests in progress; retry in ${SHED_RETRY_AFTER_SECONDS} s`);
    }
    inFlight++;
    inFlightBytes += bytes;
    inFlightRequests.set(inFlight);
    adaptive.admitted(inFlight);
    counted.set(request, { bytes, at: Date.now() });
    // The response's 'close' is the one signal every request ends with: Fastify runs neither onResponse nor
    // onRequestAbort for a client that hangs up after sending its whole request, and that slot would leak.
    reply.raw.once('close', () => release(request, reply.statusCode));
  });
  const release = (request: object, status: number): void => {
    const entry = counted.get(request);
    if (entry === undefined) return;
    counted.delete(request);
    inFlight--;
    inFlightBytes -= entry.bytes;
    inFlightRequests.set(inFlight);
    // A slow body (408) says how fast the client sends, not how fast this process answers.
    if (status !== 408) adaptive.served(Date.now() - entry.at);
  };
}
