/**
 * The one place that reads process.env. Every variable of the operator contract is validated here, once, at
 * start; a bad value fails the start with one line naming the variable (see ConfigError).
 */
import { randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import { z } from 'zod';
import { ServiceError } from './errors.js';
import { RAW_LOG_RETENTION_DAYS } from './topics.js';

export const SERVICE_ROLES = ['all', 'gateway', 'dedupe', 'enrich', 'identity-sink', 'forwarder', 'refresher', 'console'] as const;
export type ServiceRole = (typeof SERVICE_ROLES)[number];

export interface PlanLimit {
  /** Sustained requests per second per workspace. */
  readonly rps: number;
  /** Requests allowed in a burst above the sustained rate. */
  readonly burst: number;
}

/** Built-in plans; PLAN_LIMITS replaces this table as a whole. */
export const DEFAULT_PLAN_LIMITS: Readonly<Record<string, PlanLimit>> = {
  free: { rps: 10, burst: 20 },
  starter: { rps: 50, burst: 100 },
  growth: { rps: 200, burst: 400 },
  enterprise: { rps: 1000, burst: 2000 },
};

const port = z.coerce.number().int().min(0).max(65535);

/** An http(s) URL (no other scheme: `javascript:`, `file:` … are refused), without credentials or fragment. */
const url = z.string().refine((v) => {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    return false;
  }
  return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '' && u.username === '' && u.password === '' && u.hash === '';
}, 'must be an http:// or https:// URL (no user, password or #fragment)');

/** A base URL: an http(s) URL without a query either (paths are appended to it). */
const baseUrl = url.refine((v) => !v.includes('?'), 'must not have a ?query');

/** Standard base64 of exactly 32 bytes, nothing else (Buffer.from would skip junk characters silently). */
const BASE64_32 = /^[A-Za-z0-9+/]{43}=$/;
const key32 = z.string().regex(BASE64_32, 'must be base64 of exactly 32 bytes (44 characters ending in =)');

/** An IP address or a DNS name to listen on. */
const host = z.string().refine((v) => {
  if (isIP(v) !== 0) return true;
  return v.length <= 253 && /^(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*$/.test(v);
}, 'must be an IP address or a host name');

const planLimitsSchema = z
  .record(
    z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'plan names must be lowercase letters, digits, _ or - (at most 64)'),
    z.object({ rps: z.number().positive().max(1e6), burst: z.number().int().min(1).max(1e7) }).strict(),
  )
  .refine((plans) => Object.keys(plans).length > 0, 'must name at least one plan');

const envSchema = z.object({
  PORT: port.default(8080),
  HOST: host.default('0.0.0.0'),
  DATA_DIR: z.string().min(1).default('./data'),
  ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  PUBLIC_BASE_URL: baseUrl.optional(),
  CREDENTIALS_KEY: key32.optional(),
  CREDENTIALS_KEY_ID: z.string().regex(/^[A-Za-z0-9_-]{1,32}$/).default('k1'),
  PLATFORM_API_BASE: baseUrl.default('https://business-api.tiktok.com/open_api/v1.3'),
  PLATFORM_AUTH_URL: url.default('https://business-api.tiktok.com/portal/auth'),
  PLATFORM_APP_ID: z.string().min(1).optional(),
  PLATFORM_APP_SECRET: z.string().min(1).optional(),
  META_API_BASE: baseUrl.default('https://graph.facebook.com/v21.0'),
  META_AUTH_URL: url.default('https://www.facebook.com/v21.0/dialog/oauth'),
  META_APP_ID: z.string().min(1).optional(),
  META_APP_SECRET: z.string().min(1).optional(),
  GOOGLE_API_BASE: baseUrl.default('https://datamanager.googleapis.com/v1'),
  GOOGLE_AUTH_URL: url.default('https://accounts.google.com/o/oauth2/v2/auth'),
  GOOGLE_TOKEN_URL: url.default('https://oauth2.googleapis.com/token'),
  GOOGLE_REVOKE_URL: url.default('https://oauth2.googleapis.com/revoke'),
  GOOGLE_CLIENT_ID: z.string().min(1).optional(),
  GOOGLE_CLIENT_SECRET: z.string().min(1).optional(),
  KAFKA_BROKERS: z
    .string()
    .regex(/^[^,\s]+:\d+(,[^,\s]+:\d+)*$/, 'must be host:port[,host:port…]')
    .optional(),
  SCHEMA_REGISTRY_URL: url.optional(),
  /** Prefix of the Kafka consumer groups and transactional ids (several deployments on one cluster; tests). */
  KAFKA_GROUP_PREFIX: z.string().regex(/^[A-Za-z0-9._-]{0,100}$/, 'must be letters, digits, . _ - (at most 100)').optional(),
  /** How long a Kafka consumer that died keeps its partitions (the broker allows 6000 to 300000 by default). */
  KAFKA_SESSION_TIMEOUT_MS: z.coerce.number().int().min(1_000).max(3_600_000).default(10_000),
  DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').optional(),
  REDIS_URL: z.string().regex(/^rediss?:\/\//, 'must be a redis:// URL').optional(),
  METRICS_PORT: port.default(9464),
  SERVICE_ROLE: z.enum(SERVICE_ROLES).default('all'),
  /**
   * Which role runs the identity graph's sink on Kafka: `enrich` (beside enrich, the default) or `identity-sink` (its
   * own processes, so the sink's Postgres writes leave enrich's event loop). Set the same in every process.
   */
  GRAPH_SINK_ROLE: z.enum(['enrich', 'identity-sink']).default('enrich'),
  PLAN_LIMITS: z
    .string()
    .transform((raw, ctx) => {
      try {
        return JSON.parse(raw) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be JSON' });
        return z.NEVER;
      }
    })
    .pipe(planLimitsSchema)
    .optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** How long the raw log (events.raw, events.deduped) keeps accepted events; replays reach back this far. */
  RAW_LOG_RETENTION_DAYS: z.coerce.number().positive().max(3650).default(RAW_LOG_RETENTION_DAYS),
  /** Replay jobs: events read per second per worker (a replay runs below live work, docs/replay.md). */
  REPLAY_MAX_EVENTS_PER_SECOND: z.coerce.number().int().min(1).max(100_000).default(2_000),
  /** Dedupe window in hours (docs/pipeline.md explains the memory / late-duplicate trade-off). */
  DEDUPE_WINDOW_HOURS: z.coerce.number().positive().default(7 * 24),
  /** Previous credential keys still readable after a rotation: `id:base64[,id:base64…]` (docs/platform.md). */
  CREDENTIALS_PREVIOUS_KEYS: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,32}:[A-Za-z0-9+/=]+(,[A-Za-z0-9_-]{1,32}:[A-Za-z0-9+/=]+)*$/, 'must be id:base64[,id:base64…]')
    .refine(
      (v) => v.split(',').every((pair) => BASE64_32.test(pair.slice(pair.indexOf(':') + 1))),
      'every key must be base64 of exactly 32 bytes (44 characters ending in =)',
    )
    .optional(),
  /** Forwarder and token refresher tuning (docs/platform.md). */
  FORWARDER_LINGER_MS: z.coerce.number().int().min(0).max(60_000).default(200),
  FORWARDER_BATCH_SIZE: z.coerce.number().int().min(1).max(1000).default(1000),
  FORWARDER_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(8),
  FORWARDER_REQUEST_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
  FORWARDER_RETRY_BASE_MS: z.coerce.number().int().min(1).max(600_000).default(500),
  FORWARDER_RETRY_MAX_MS: z.coerce.number().int().min(1).max(3_600_000).default(60_000),
  FORWARDER_LEDGER_RETENTION_HOURS: z.coerce.number().min(48, 'must be at least 48 (the platform dedups for 48 h)').default(7 * 24),
  FORWARDER_PARK_MAX_HOURS: z.coerce.number().positive().default(7 * 24),
  REFRESH_INTERVAL_MS: z.coerce.number().int().min(10).max(600_000).default(1000),
  /** Privacy retention (docs/privacy.md, "What is stored and for how long"). */
  IDENTITY_GRAPH_RETENTION_DAYS: z.coerce.number().positive().max(3650).default(180),
  DEAD_LETTER_RETENTION_DAYS: z.coerce.number().positive().max(30, 'must be at most 30 (the dead-letter topics keep 30 days)').default(30),
  AUDIT_LOG_RETENTION_DAYS: z.coerce.number().positive().max(3650).default(400),
  CONVERSION_EXPLANATION_RETENTION_DAYS: z.coerce.number().positive().max(365).default(30),
  RETENTION_SWEEP_INTERVAL_MS: z.coerce.number().int().min(100).max(86_400_000).default(600_000),
  ERASURE_POLL_INTERVAL_MS: z.coerce.number().int().min(10).max(600_000).default(1_000),
  /** Overload shedding of the ingestion routes (docs/operations.md, "Overload and limits"). */
  GATEWAY_MAX_IN_FLIGHT: z.coerce.number().int().min(1).max(100_000).default(256),
  GATEWAY_MAX_IN_FLIGHT_BYTES: z.coerce.number().int().min(1_048_576).max(1_073_741_824).default(2_097_152),
  GATEWAY_MAX_EVENT_LOOP_DELAY_MS: z.coerce.number().int().min(0).max(1_500).default(400),
  GATEWAY_MAX_EVENT_LOOP_UTILIZATION: z.coerce.number().min(0).max(1).default(0),
  /** Extra acceptors on the service's port (http/acceptors.ts); 0 = Node's one. */
  GATEWAY_ACCEPTORS: z.coerce.number().int().min(0).max(256).default(32),
});

export type RawEnv = z.input<typeof envSchema>;

/** Every variable the service reads (deployment manifests are checked against it). */
export const KNOWN_VARIABLES: readonly string[] = Object.keys(envSchema.shape);

export interface Config {
  readonly port: number;
  readonly host: string;
  readonly dataDir: string;
  /** Set when ADMIN_TOKEN was unset: main prints it once. */
  readonly adminTokenGenerated: boolean;
  readonly adminToken: string;
  readonly publicBaseUrl: string;
  /** undefined: main derives one in DATA_DIR with a warning. */
  readonly credentialsKey: Buffer | undefined;
  readonly credentialsKeyId: string;
  readonly platform: {
    readonly apiBase: string;
    readonly authUrl: string;
    readonly appId: string | undefined;
    readonly appSecret: string | undefined;
  };
  /** The service's OAuth client on Google (GOOGLE_*), for `google` destinations. */
  readonly google: {
    readonly apiBase: string;
    readonly authUrl: string;
    readonly tokenUrl: string;
    readonly revokeUrl: string;
    readonly clientId: string | undefined;
    readonly clientSecret: string | undefined;
  };
  /** The service's app on Meta (META_*), for `meta` destinations. */
  readonly meta: {
    readonly apiBase: string;
    readonly authUrl: string;
    readonly appId: string | undefined;
    readonly appSecret: string | undefined;
  };
  readonly kafka:
    | {
        readonly brokers: string[];
        readonly schemaRegistryUrl: string;
        readonly groupPrefix: string;
        readonly sessionTimeoutMs: number;
      }
    | undefined;
  readonly databaseUrl: string | undefined;
  readonly redisUrl: string | undefined;
  readonly metricsPort: number;
  readonly role: ServiceRole;
  /** GRAPH_SINK_ROLE: the role whose processes run the graph sink on Kafka. */
  readonly graphSinkRole: 'enrich' | 'identity-sink';
  readonly planLimits: Readonly<Record<string, PlanLimit>>;
  readonly logLevel: string;
  readonly dedupeWindowMs: number;
  /** Retention of the raw log (events.raw, events.deduped), both runtimes. */
  readonly rawLogRetentionMs: number;
  readonly replay: { readonly maxEventsPerSecond: number };
  /** Older credential keys by key id, for reading tokens encrypted before a rotation. */
  readonly previousCredentialsKeys: ReadonlyMap<string, Buffer>;
  /** Extra acceptors on the service's port (GATEWAY_ACCEPTORS). */
  readonly acceptors: number;
  readonly overload: GatewayOverloadConfig;
  readonly forwarder: {
    readonly lingerMs: number;
    readonly batchSize: number;
    readonly concurrency: number;
    readonly requestTimeoutMs: number;
    readonly retryBaseMs: number;
    readonly retryMaxMs: number;
    readonly ledgerRetentionMs: number;
    readonly parkMaxAgeMs: number;
    readonly refreshIntervalMs: number;
  };
  readonly privacy: PrivacyConfig;
}

/** Retention of each store and the privacy jobs' pace (docs/privacy.md). */
export interface PrivacyConfig {
  readonly graphRetentionMs: number;
  readonly deadLetterRetentionMs: number;
  readonly auditRetentionMs: number;
  readonly explanationRetentionMs: number;
  readonly sweepIntervalMs: number;
  readonly erasurePollMs: number;
}

export interface GatewayOverloadConfig {
  /** Ingestion requests in progress per process; one more is shed with 503. */
  readonly maxInFlight: number;
  /** Declared body bytes of the ingestion requests in progress per process; a request that would pass it is shed. */
  readonly maxInFlightBytes: number;
  /** Event-loop delay (ms) past which new ingestion requests are shed; 0: not checked. */
  readonly maxEventLoopDelayMs: number;
  /** Event-loop utilisation (0..1) past which new ingestion requests are shed; 0: not checked. */
  readonly maxEventLoopUtilization: number;
}

const DAY_MS = 24 * 3600_000;

export class ConfigError extends ServiceError {
  constructor(readonly variable: string, problem: string) {
    super(`invalid configuration: ${variable} ${problem}`);
  }
}

/** Parses the environment. Throws ConfigError naming the first bad variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  // Empty strings count as unset: `FOO= make run` should mean the default.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = envSchema.safeParse(cleaned);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const variable = String(issue.path[0] ?? 'environment');
    const inner = issue.path.slice(1).map(String).join('.');
    // One line, whatever the schema said (zod messages may hold newlines).
    const message = issue.message.replace(/^Invalid input: /, '').replace(/\s+/g, ' ').slice(0, 300);
    throw new ConfigError(variable, inner === '' ? message : `${inner}: ${message}`);
  }
  const e = parsed.data;
  if (e.KAFKA_BROKERS && !e.SCHEMA_REGISTRY_URL) {
    throw new ConfigError('SCHEMA_REGISTRY_URL', 'is required when KAFKA_BROKERS is set');
  }
  if (e.KAFKA_BROKERS && !e.DATABASE_URL) {
    throw new ConfigError('DATABASE_URL', 'is required when KAFKA_BROKERS is set (the Kafka runtime keeps its state in Postgres)');
  }
  if (e.GOOGLE_CLIENT_ID && !e.GOOGLE_CLIENT_SECRET) throw new ConfigError('GOOGLE_CLIENT_SECRET', 'is required when GOOGLE_CLIENT_ID is set');
  if (e.META_APP_ID && !e.META_APP_SECRET) throw new ConfigError('META_APP_SECRET', 'is required when META_APP_ID is set');
  if (e.PLATFORM_APP_ID && !e.PLATFORM_APP_SECRET) {
    throw new ConfigError('PLATFORM_APP_SECRET', 'is required when PLATFORM_APP_ID is set');
  }
  const adminToken = e.ADMIN_TOKEN ?? `adm_${randomBytes(24).toString('base64url')}`;
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir: e.DATA_DIR,
    adminTokenGenerated: e.ADMIN_TOKEN === undefined,
    adminToken,
    publicBaseUrl: (e.PUBLIC_BASE_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, ''),
    credentialsKey: e.CREDENTIALS_KEY ? Buffer.from(e.CREDENTIALS_KEY, 'base64') : undefined,
    credentialsKeyId: e.CREDENTIALS_KEY_ID,
    platform: {
      apiBase: e.PLATFORM_API_BASE.replace(/\/+$/, ''),
      authUrl: e.PLATFORM_AUTH_URL,
      appId: e.PLATFORM_APP_ID,
      appSecret: e.PLATFORM_APP_SECRET,
    },
    meta: {
      apiBase: e.META_API_BASE.replace(/\/+$/, ''),
      authUrl: e.META_AUTH_URL,
      appId: e.META_APP_ID,
      appSecret: e.META_APP_SECRET,
    },
    google: {
      apiBase: e.GOOGLE_API_BASE.replace(/\/+$/, ''),
      authUrl: e.GOOGLE_AUTH_URL,
      tokenUrl: e.GOOGLE_TOKEN_URL,
      revokeUrl: e.GOOGLE_REVOKE_URL,
      clientId: e.GOOGLE_CLIENT_ID,
      clientSecret: e.GOOGLE_CLIENT_SECRET,
    },
    kafka: e.KAFKA_BROKERS
      ? {
          brokers: e.KAFKA_BROKERS.split(','),
          schemaRegistryUrl: e.SCHEMA_REGISTRY_URL!,
          groupPrefix: e.KAFKA_GROUP_PREFIX ?? '',
          sessionTimeoutMs: e.KAFKA_SESSION_TIMEOUT_MS,
        }
      : undefined,
    databaseUrl: e.DATABASE_URL,
    redisUrl: e.REDIS_URL,
    metricsPort: e.METRICS_PORT,
    role: e.SERVICE_ROLE,
    graphSinkRole: e.GRAPH_SINK_ROLE,
    planLimits: e.PLAN_LIMITS ?? DEFAULT_PLAN_LIMITS,
    logLevel: e.LOG_LEVEL,
    dedupeWindowMs: e.DEDUPE_WINDOW_HOURS * 3600_000,
    rawLogRetentionMs: e.RAW_LOG_RETENTION_DAYS * 24 * 3600_000,
    replay: { maxEventsPerSecond: e.REPLAY_MAX_EVENTS_PER_SECOND },
    previousCredentialsKeys: new Map(
      (e.CREDENTIALS_PREVIOUS_KEYS?.split(',') ?? []).map((pair) => {
        const i = pair.indexOf(':');
        return [pair.slice(0, i), Buffer.from(pair.slice(i + 1), 'base64')] as const;
      }),
    ),
    acceptors: e.GATEWAY_ACCEPTORS,
    overload: {
      maxInFlight: e.GATEWAY_MAX_IN_FLIGHT,
      maxInFlightBytes: e.GATEWAY_MAX_IN_FLIGHT_BYTES,
      maxEventLoopDelayMs: e.GATEWAY_MAX_EVENT_LOOP_DELAY_MS,
      maxEventLoopUtilization: e.GATEWAY_MAX_EVENT_LOOP_UTILIZATION,
    },
    forwarder: {
      lingerMs: e.FORWARDER_LINGER_MS,
      batchSize: e.FORWARDER_BATCH_SIZE,
      concurrency: e.FORWARDER_CONCURRENCY,
      requestTimeoutMs: e.FORWARDER_REQUEST_TIMEOUT_MS,
      retryBaseMs: e.FORWARDER_RETRY_BASE_MS,
      retryMaxMs: e.FORWARDER_RETRY_MAX_MS,
      ledgerRetentionMs: e.FORWARDER_LEDGER_RETENTION_HOURS * 3600_000,
      parkMaxAgeMs: e.FORWARDER_PARK_MAX_HOURS * 3600_000,
      refreshIntervalMs: e.REFRESH_INTERVAL_MS,
    },
    privacy: {
      graphRetentionMs: e.IDENTITY_GRAPH_RETENTION_DAYS * DAY_MS,
      deadLetterRetentionMs: e.DEAD_LETTER_RETENTION_DAYS * DAY_MS,
      auditRetentionMs: e.AUDIT_LOG_RETENTION_DAYS * DAY_MS,
      explanationRetentionMs: e.CONVERSION_EXPLANATION_RETENTION_DAYS * DAY_MS,
      sweepIntervalMs: e.RETENTION_SWEEP_INTERVAL_MS,
      erasurePollMs: e.ERASURE_POLL_INTERVAL_MS,
    },
  };
}
