/**
 * The sending client: queues events, sends them to endpoint A in batches (by count, bytes and time, never past the
 * service's 500 events or 1 MiB), keeps each event's idempotency key across retries, retries what may succeed later
 * (429, 503 and other 5xx, 408, network errors) with jittered exponential backoff that honours Retry-After, never
 * retries what cannot (400, 401, 413, ...: reported with the problem's detail), and flushes on shutdown.
 *
 * NOTE: one request in flight at a time. A batch keeps its events across retries; new events queue behind it.
 */
import { randomUUID } from 'node:crypto';
import type { Accepted, ApiVersion, EventInput, Problem, WireEvent } from './types.js';

export const SERVICE_LIMITS = {
  maxBatchEvents: 500,
  maxBatchBytes: 1024 * 1024,
  maxEventBytes: 32 * 1024,
} as const;

/** The API-Version this SDK sends (event time needs it). */
export const API_VERSION: ApiVersion = '2026-12-01';

export interface RetryOptions {
  /** First backoff, doubled per attempt (with jitter). Default 250 ms. */
  readonly baseDelayMs?: number;
  /** Largest backoff (Retry-After may ask for longer and is honoured). Default 30 s. */
  readonly maxDelayMs?: number;
  /** How long one batch may keep failing before it is given up and reported. Default 10 minutes. */
  readonly giveUpAfterMs?: number;
}

export interface ClientOptions {
  /** e.g. `https://ingest.example.com` (no trailing `/v1`). */
  readonly baseUrl: string;
  /** A workspace API key (`evk_live_…` or `evk_test_…`). */
  readonly apiKey: string;
  /** Events per request; at most 500. Default 500. */
  readonly maxBatchEvents?: number;
  /** Bytes per request body; at most 1 MiB. Default 1 MiB. */
  readonly maxBatchBytes?: number;
  /** How long an event may wait for a batch to fill. Default 1000 ms. */
  readonly flushIntervalMs?: number;
  /** Events held (queued and in flight) before track() refuses more. Default 100,000. */
  readonly maxQueueEvents?: number;
  /** Per-request timeout. Default 10 s. */
  readonly requestTimeoutMs?: number;
  readonly retry?: RetryOptions;
  /** Called for events that will not be delivered: refused by the service, or given up. Default: console.error. */
  readonly onError?: (error: DeliveryError) => void;
  /** Install SIGTERM/SIGINT handlers that flush before the process exits. Default false (see shutdown()). */
  readonly handleSignals?: boolean;
}

export type DeliveryFailure = 'refused' | 'gave-up' | 'shutdown';

/** Events that will not be delivered, and why. `problem` is the service's answer when it refused them. */
export class DeliveryError extends Error {
  override readonly name = 'DeliveryError';
  constructor(
    readonly reason: DeliveryFailure,
    message: string,
    readonly events: readonly WireEvent[],
    readonly status?: number,
    readonly problem?: Problem,
  ) {
    super(message);
  }
  /** The idempotency keys of the events concerned. */
  get idempotencyKeys(): string[] {
    return this.events.map((e) => e.event_metadata.idempotency_key);
  }
}

export class QueueFullError extends Error {
  override readonly name = 'QueueFullError';
}

export interface ClientStats {
  /** Events the service accepted (202). */
  readonly delivered: number;
  /** Events reported to onError. */
  readonly failed: number;
  /** Requests retried. */
  readonly retries: number;
  /** Requests sent, retries included. */
  readonly requests: number;
}

interface Queued {
  readonly event: WireEvent;
  readonly json: string;
  readonly bytes: number;
}

const RETRYABLE_STATUS = new Set([408, 425, 429, 500, 502, 503, 504]);

export class EventClient {
  readonly #url: string;
  readonly #apiKey: string;
  readonly #maxEvents: number;
  readonly #maxBytes: number;
  readonly #flushIntervalMs: number;
  readonly #maxQueue: number;
  readonly #timeoutMs: number;
  readonly #baseDelay: number;
  readonly #maxDelay: number;
  readonly #giveUpAfter: number;
  readonly #onError: (error: DeliveryError) => void;

  #queue: Queued[] = [];
  #queuedBytes = 0;
  #inFlight = 0;
  #timer: NodeJS.Timeout | undefined;
  #pumping: Promise<void> | undefined;
  #flushRequested = false;
  #closed = false;
  /** While shutting down: the time after which undelivered events are given up. */
  #deadline = Infinity;
  #wake: (() => void) | undefined;
  #stats = { delivered: 0, failed: 0, retries: 0, requests: 0 };
  readonly #signalHandlers: Array<[NodeJS.Signals, () => void]> = [];
  readonly #beforeExit = () => void this.flush();

  constructor(options: ClientOptions) {
    if (!options.baseUrl) throw new TypeError('baseUrl is required');
    if (!options.apiKey) throw new TypeError('apiKey is required');
    this.#url = `${options.baseUrl.replace(/\/+$/, '')}/v1/events`;
    this.#apiKey = options.apiKey;
    this.#maxEvents = bounded('maxBatchEvents', options.maxBatchEvents, SERVICE_LIMITS.maxBatchEvents, 1);
    this.#maxBytes = bounded('maxBatchBytes', options.maxBatchBytes, SERVICE_LIMITS.maxBatchBytes, 2 + SERVICE_LIMITS.maxEventBytes);
    this.#flushIntervalMs = options.flushIntervalMs ?? 1000;
    this.#maxQueue = options.maxQueueEvents ?? 100_000;
    this.#timeoutMs = options.requestTimeoutMs ?? 10_000;
    this.#baseDelay = options.retry?.baseDelayMs ?? 250;
    this.#maxDelay = options.retry?.maxDelayMs ?? 30_000;
    this.#giveUpAfter = options.retry?.giveUpAfterMs ?? 10 * 60_000;
    this.#onError = options.onError ?? ((e) => console.error(`[event-forwarder] ${e.message}`));
    // A process that ends its work normally still sends what it queued.
    process.on('beforeExit', this.#beforeExit);
    if (options.handleSignals) {
      for (const signal of ['SIGTERM', 'SIGINT'] as const) {
        const handler = () => {
          void this.shutdown().finally(() => {
            this.#removeProcessHooks();
            process.kill(process.pid, signal);
          });
        };
        this.#signalHandlers.push([signal, handler]);
        process.once(signal, handler);
      }
    }
  }

  /** Events held by the client: waiting for a batch, or in a request (being sent or retried). */
  get queueDepth(): number {
    return this.#queue.length + this.#inFlight;
  }

  get stats(): ClientStats {
    return { ...this.#stats };
  }

  /**
   * Queues one event and returns its idempotency key (the one given, or a new random one). Throws when the event
   * is larger than the service takes (32 KiB), when the queue is full, or after shutdown.
   */
  track(input: EventInput): string {
    if (this.#closed) throw new Error('the client is shut down');
    if (this.queueDepth >= this.#maxQueue) {
      throw new QueueFullError(`${this.queueDepth} events are waiting (maxQueueEvents); the service is unreachable or too slow`);
    }
    const key = input.event_metadata.idempotency_key ?? randomUUID();
    const event = toWire(input, key);
    const json = JSON.stringify(event);
    const bytes = Buffer.byteLength(json);
    if (bytes > SERVICE_LIMITS.maxEventBytes) {
      throw new RangeError(`event ${key} is ${bytes} bytes as JSON; the service takes at most ${SERVICE_LIMITS.maxEventBytes}`);
    }
    this.#queue.push({ event, json, bytes });
    this.#queuedBytes += bytes;
    if (this.#queue.length >= this.#maxEvents || batchBytes(this.#queue.length, this.#queuedBytes) >= this.#maxBytes) {
      this.#startPump();
    } else {
      this.#timer ??= unrefTimer(() => {
        this.#timer = undefined;
        this.#startPump(true);
      }, this.#flushIntervalMs);
    }
    return key;
  }

  /** Sends everything queued now; resolves when it is delivered or reported to onError. */
  async flush(): Promise<void> {
    while (this.queueDepth > 0) {
      this.#startPump(true);
      await this.#pumping;
    }
  }

  /**
   * Stops taking events and flushes. Events still undelivered after `timeoutMs` (default 30 s) are reported to
   * onError as `shutdown` and returned, so the caller can keep them.
   */
  async shutdown(options: { timeoutMs?: number } = {}): Promise<{ undelivered: WireEvent[] }> {
    this.#closed = true;
    this.#deadline = Date.now() + (options.timeoutMs ?? 30_000);
    const undelivered: WireEvent[] = [];
    this.#undelivered = undelivered;
    this.#wake?.();
    try {
      await this.flush();
    } finally {
      this.#undelivered = undefined;
      if (this.#timer) clearTimeout(this.#timer);
      this.#removeProcessHooks();
    }
    return { undelivered };
  }

  #undelivered: WireEvent[] | undefined;

  #report(e: DeliveryError): void {
    this.#stats.failed += e.events.length;
    if (e.reason === 'shutdown') this.#undelivered?.push(...e.events);
    try {
      this.#onError(e);
    } catch {
      // a throwing callback must not stop delivery of the other events
    }
  }

  #removeProcessHooks(): void {
    process.off('beforeExit', this.#beforeExit);
    for (const [signal, handler] of this.#signalHandlers) process.off(signal, handler);
    this.#signalHandlers.length = 0;
  }

  #startPump(flush = false): void {
    if (flush) this.#flushRequested = true;
    this.#pumping ??= this.#pump().finally(() => {
      this.#pumping = undefined;
      // Events that arrived while the last batch was sent and already fill a batch go now.
      if (this.#queue.length >= this.#maxEvents) this.#startPump();
    });
  }

  async #pump(): Promise<void> {
    while (this.#queue.length > 0) {
      const full = this.#queue.length >= this.#maxEvents || batchBytes(this.#queue.length, this.#queuedBytes) >= this.#maxBytes;
      if (!full && !this.#flushRequested && !this.#closed) break;
      const batch = this.#takeBatch();
      this.#inFlight = batch.length;
      try {
        await this.#deliver(batch);
      } finally {
        this.#inFlight = 0;
      }
    }
    this.#flushRequested = false;
    if (this.#queue.length > 0 && !this.#timer) {
      this.#timer = unrefTimer(() => {
        this.#timer = undefined;
        this.#startPump(true);
      }, this.#flushIntervalMs);
    }
  }

  #takeBatch(): Queued[] {
    let n = 0;
    let bytes = 0;
    while (n < this.#queue.length && n < this.#maxEvents) {
      const next = bytes + this.#queue[n]!.bytes;
      if (n > 0 && batchBytes(n + 1, next) > this.#maxBytes) break;
      bytes = next;
      n++;
    }
    const batch = this.#queue.splice(0, n);
    this.#queuedBytes -= bytes;
    return batch;
  }

  /** Sends one batch until it is accepted, refused or given up; a refused batch is narrowed to the bad events. */
  async #deliver(batch: Queued[]): Promise<void> {
    const firstFailure = Date.now();
    for (let attempt = 1; ; attempt++) {
      const outcome = await this.#send(batch);
      if (outcome.kind === 'accepted') {
        this.#stats.delivered += batch.length;
        return;
      }
      if (outcome.kind === 'refused') {
        await this.#refused(batch, outcome.status, outcome.problem);
        return;
      }
      const now = Date.now();
      const delay = outcome.retryAfterMs !== undefined ? outcome.retryAfterMs + jitter(Math.min(1000, outcome.retryAfterMs / 5)) : this.#backoff(attempt);
      const why = `${outcome.why} (attempt ${attempt})`;
      if (now + delay > this.#deadline) {
        this.#report(new DeliveryError('shutdown', `shut down before ${batch.length} events were delivered: ${why}`, batch.map((q) => q.event)));
        return;
      }
      if (now + delay - firstFailure > this.#giveUpAfter) {
        this.#report(
          new DeliveryError('gave-up', `gave up on ${batch.length} events after ${Math.round((now - firstFailure) / 1000)} s: ${why}`, batch.map((q) => q.event)),
        );
        return;
      }
      this.#stats.retries++;
      if (!(await this.#sleep(delay))) {
        // shutdown() began and its deadline falls before the wait is over: retrying early would ignore Retry-After.
        this.#report(new DeliveryError('shutdown', `shut down before ${batch.length} events were delivered: ${why}`, batch.map((q) => q.event)));
        return;
      }
    }
  }

  /**
   * The service refuses a request whole. When the problem names one event (`[3].event_metadata…`) that event is
   * reported and the others are sent again; when it names none, the batch is split in two until it does.
   */
  async #refused(batch: Queued[], status: number, problem: Problem | undefined): Promise<void> {
    const detail = problem?.detail ?? `HTTP ${status}`;
    const index = /^\[(\d+)\]/.exec(detail)?.[1];
    const perEvent = status === 400 || status === 413;
    if (batch.length > 1 && perEvent) {
      const i = index === undefined ? -1 : Number(index);
      if (i >= 0 && i < batch.length) {
        const bad = batch[i]!;
        this.#report(
          new DeliveryError('refused', `refused (${status}): ${detail.replace(/^\[\d+\]/, `event ${bad.event.event_metadata.idempotency_key}:`)}`, [bad.event], status, problem),
        );
        const rest = batch.filter((_, j) => j !== i);
        await this.#deliver(rest);
        return;
      }
      const half = Math.ceil(batch.length / 2);
      await this.#deliver(batch.slice(0, half));
      await this.#deliver(batch.slice(half));
      return;
    }
    const what = batch.length === 1 ? `event ${batch[0]!.event.event_metadata.idempotency_key}` : `${batch.length} events`;
    this.#report(new DeliveryError('refused', `${what} refused (${status}): ${detail}`, batch.map((q) => q.event), status, problem));
  }

  async #send(
    batch: Queued[],
  ): Promise<
    | { kind: 'accepted'; body: Accepted }
    | { kind: 'refused'; status: number; problem?: Problem }
    | { kind: 'retry'; why: string; retryAfterMs?: number }
  > {
    this.#stats.requests++;
    let res: Response;
    try {
      res = await fetch(this.#url, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${this.#apiKey}`,
          'content-type': 'application/json',
          'api-version': API_VERSION,
          'user-agent': 'event-forwarder-node/1.0.0',
        },
        body: `[${batch.map((q) => q.json).join(',')}]`,
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
    } catch (err) {
      // Connection refused or reset, DNS, timeout: the events may or may not have arrived; their keys make a resend safe.
      const cause = (err as { cause?: { code?: string } }).cause?.code;
      return { kind: 'retry', why: `network error: ${cause ?? (err as Error).message}` };
    }
    const text = await res.text().catch(() => '');
    if (res.status === 202) return { kind: 'accepted', body: parseJson(text) as Accepted };
    const problem = parseJson(text) as Problem | undefined;
    if (RETRYABLE_STATUS.has(res.status)) {
      return { kind: 'retry', why: `HTTP ${res.status}${problem?.detail ? `: ${problem.detail}` : ''}`, retryAfterMs: retryAfterMs(res.headers.get('retry-after')) };
    }
    return { kind: 'refused', status: res.status, problem: problem && typeof problem.detail === 'string' ? problem : undefined };
  }

  /** Exponential backoff with equal jitter: between half and all of base·2^(attempt−1), capped. */
  #backoff(attempt: number): number {
    const ceiling = Math.min(this.#maxDelay, this.#baseDelay * 2 ** Math.min(attempt - 1, 30));
    return ceiling / 2 + jitter(ceiling / 2);
  }

  /**
   * Sleeps; resolves false when cut short because shutdown() began with a deadline before the end of the wait (a
   * long Retry-After must not hold a shutdown past its deadline, and must not be cut short either).
   */
  #sleep(ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const end = Date.now() + ms;
      const timer = setTimeout(() => finish(true), ms);
      const finish = (slept: boolean) => {
        clearTimeout(timer);
        this.#wake = undefined;
        resolve(slept);
      };
      this.#wake = () => {
        if (end > this.#deadline) finish(false);
      };
    });
  }
}

export function createClient(options: ClientOptions): EventClient {
  return new EventClient(options);
}

function toWire(input: EventInput, key: string): WireEvent {
  const { event_time, event_metadata, ...rest } = input;
  const event: WireEvent = { ...rest, event_metadata: { ...event_metadata, idempotency_key: key } };
  if (event_time !== undefined) event.event_time = event_time instanceof Date ? event_time.toISOString() : event_time;
  return event;
}

function bounded(name: string, value: number | undefined, max: number, min: number): number {
  if (value === undefined) return max;
  if (!Number.isInteger(value) || value < min || value > max) throw new RangeError(`${name} must be an integer in [${min}, ${max}]`);
  return value;
}

const batchBytes = (events: number, eventBytes: number): number => 2 + eventBytes + Math.max(0, events - 1);
const jitter = (ms: number): number => Math.random() * ms;

function unrefTimer(fn: () => void, ms: number): NodeJS.Timeout {
  const t = setTimeout(fn, ms);
  t.unref();
  return t;
}

/** Retry-After as delay-seconds or an HTTP date (RFC 9110 §10.2.3). */
export function retryAfterMs(value: string | null): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
