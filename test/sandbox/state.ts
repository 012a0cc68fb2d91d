import { randomBytes } from 'node:crypto';

/** Options fixed for the life of one sandbox instance (the settings part can later change via the control API). */
export interface SandboxOptions {
  appId?: string;
  appSecret?: string;
  accessTtlSeconds?: number;
  refreshTtlSeconds?: number;
  /** Lifetime of an auth_code; default 600 s. */
  authCodeTtlSeconds?: number;
  rotateRefresh?: boolean;
  nonExpiring?: boolean;
  timezone?: string;
  advertiserIds?: string[];
  advertiserName?: string;
  scope?: string[];
  /** If given, the authorize page only accepts these redirect URIs (compared without query string). */
  redirectUris?: string[];
  /** Clock in epoch milliseconds; tests inject one to move time. */
  now?: () => number;
  logger?: boolean;
}

/** Runtime switches, changed through POST /_control/settings (snake_case like the wire format). */
export interface SandboxSettings {
  access_ttl_seconds: number;
  refresh_ttl_seconds: number;
  rotate_refresh: boolean;
  non_expiring: boolean;
  deny_authorize: boolean;
  timezone: string;
  advertiser_ids: string[];
  /** Replaying a rotated refresh token revokes the whole grant (OAuth 2.1 reuse detection). Default false. */
  revoke_grant_on_refresh_reuse: boolean;
}

export interface AuthCode {
  code: string;
  redirect_uri: string;
  code_challenge: string | null;
  code_challenge_method: 'S256' | 'plain' | null;
  advertiser_ids: string[];
  expires_at: number;
  used: boolean;
}

export interface Grant {
  id: string;
  advertiser_ids: string[];
  scope: string[];
  created_at: number;
  revoked_at: number | null;
}

export interface AccessTokenRecord {
  token: string;
  grant_id: string;
  issued_at: number;
  /** null: never expires. */
  expires_at: number | null;
}

export interface RefreshTokenRecord {
  token: string;
  grant_id: string;
  issued_at: number;
  expires_at: number;
  /** Set when rotation replaced this refresh token. */
  rotated_at: number | null;
}

export interface ReceivedEvent {
  event_source: string;
  event_source_id: string;
  test_event_code: string | null;
  advertiser_id: string | null;
  received_at: string;
  request_id: string;
  record: Record<string, unknown>;
}

export interface CallLogEntry {
  path: string;
  method: string;
  at: string;
  code: number | null;
  http_status: number;
  /** Which fault queue the endpoint belongs to, if any. */
  endpoint: FaultKey | 'authorize' | null;
  /** True when an injected fault produced the answer. */
  fault: boolean;
}

export interface RevocationRecord {
  at: string;
  access_token: string;
  /** 'revoked' | 'already_revoked' | 'unknown_token' | 'bad_credentials' */
  outcome: string;
  code: number;
}

export const FAULT_KEYS = ['events', 'refresh', 'token', 'advertiser', 'revoke'] as const;
export type FaultKey = (typeof FAULT_KEYS)[number];

export interface Fault {
  http_status?: number;
  code?: number;
  message?: string;
  delay_ms?: number;
  retry_after?: number;
  /** Only calls of event/track for this event source id (pixel) take this fault; others pass it by. */
  event_source_id?: string;
  /** Remaining applications. */
  times: number;
}

export interface SandboxState {
  readonly appId: string;
  readonly appSecret: string;
  readonly advertiserName: string;
  readonly scope: readonly string[];
  readonly redirectUris: readonly string[] | null;
  readonly authCodeTtlMs: number;
  readonly now: () => number;
  readonly initialSettings: Readonly<SandboxSettings>;
  settings: SandboxSettings;
  codes: Map<string, AuthCode>;
  grants: Map<string, Grant>;
  accessTokens: Map<string, AccessTokenRecord>;
  refreshTokens: Map<string, RefreshTokenRecord>;
  received: ReceivedEvent[];
  calls: CallLogEntry[];
  revocations: RevocationRecord[];
  faults: Record<FaultKey, Fault[]>;
  /** Calls held in a delay fault right now, per endpoint: a request that arrived whole and is not answered yet. */
  delayed: Record<string, number>;
  requestSeq: number;
}

export const DEFAULT_APP_ID = 'sandbox-app';
export const DEFAULT_APP_SECRET = 'sandbox-secret';
export const DEFAULT_ADVERTISER_IDS = ['7000000000000000001'];
export const DEFAULT_TIMEZONE = 'America/New_York';
export const DEFAULT_ACCESS_TTL_SECONDS = 86_400;
export const DEFAULT_REFRESH_TTL_SECONDS = 365 * 86_400;
export const DEFAULT_AUTH_CODE_TTL_SECONDS = 600;
export const DEFAULT_SCOPE = ['event.track', 'advertiser.info'];

function emptyFaults(): Record<FaultKey, Fault[]> {
  return { events: [], refresh: [], token: [], advertiser: [], revoke: [] };
}

export function createState(opts: SandboxOptions = {}): SandboxState {
  const initialSettings: SandboxSettings = {
    access_ttl_seconds: opts.accessTtlSeconds ?? DEFAULT_ACCESS_TTL_SECONDS,
    refresh_ttl_seconds: opts.refreshTtlSeconds ?? DEFAULT_REFRESH_TTL_SECONDS,
    rotate_refresh: opts.rotateRefresh ?? true,
    non_expiring: opts.nonExpiring ?? false,
    deny_authorize: false,
    timezone: opts.timezone ?? DEFAULT_TIMEZONE,
    advertiser_ids: [...(opts.advertiserIds ?? DEFAULT_ADVERTISER_IDS)],
    revoke_grant_on_refresh_reuse: false,
  };
  return {
    appId: opts.appId ?? DEFAULT_APP_ID,
    appSecret: opts.appSecret ?? DEFAULT_APP_SECRET,
    advertiserName: opts.advertiserName ?? 'Sandbox Advertiser',
    scope: [...(opts.scope ?? DEFAULT_SCOPE)],
    redirectUris: opts.redirectUris ? [...opts.redirectUris] : null,
    authCodeTtlMs: (opts.authCodeTtlSeconds ?? DEFAULT_AUTH_CODE_TTL_SECONDS) * 1000,
    now: opts.now ?? Date.now,
    initialSettings,
    settings: { ...initialSettings, advertiser_ids: [...initialSettings.advertiser_ids] },
    codes: new Map(),
    grants: new Map(),
    accessTokens: new Map(),
    refreshTokens: new Map(),
    received: [],
    calls: [],
    revocations: [],
    faults: emptyFaults(),
    delayed: {},
    requestSeq: 0,
  };
}

/** Forget every code, token, record, log and fault, and restore the start-up settings. */
export function resetState(state: SandboxState): void {
  state.settings = { ...state.initialSettings, advertiser_ids: [...state.initialSettings.advertiser_ids] };
  state.codes.clear();
  state.grants.clear();
  state.accessTokens.clear();
  state.refreshTokens.clear();
  state.received = [];
  state.calls = [];
  state.revocations = [];
  state.faults = emptyFaults();
}

export function randomToken(bytes = 20): string {
  return randomBytes(bytes).toString('hex');
}

/** TikTok-style request id: UTC timestamp digits followed by random hex and a per-instance sequence number. */
export function nextRequestId(state: SandboxState): string {
  state.requestSeq += 1;
  const stamp = new Date(state.now()).toISOString().replace(/\D/g, '').slice(0, 14);
  return `${stamp}${randomBytes(6).toString('hex').toUpperCase()}${state.requestSeq.toString(16).toUpperCase()}`;
}

export function isoAt(state: SandboxState): string {
  return new Date(state.now()).toISOString();
}
