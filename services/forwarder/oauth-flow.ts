/**
 * Connecting a workspace's ad account by OAuth 2.0 (authorization code, with PKCE S256 where the platform uses it).
 * start() issues a one-time `state` bound to the workspace and to this flow (a newer flow for the workspace
 * supersedes it), valid for 10 minutes; only its SHA-256 is stored, with the PKCE verifier sealed. bind() ties
 * the state to the browser that opens the connect link (GET /oauth/start sets a cookie holding a random binding;
 * only its SHA-256 is stored), and complete() honours the callback only with that binding: a state that leaked
 * cannot connect the workspace from another browser. complete() claims the state atomically (used once,
 * unexpired, same browser), exchanges the code, reads the advertiser's time zone and stores the connection. A
 * replayed, expired, superseded, unknown or foreign-browser state is refused and changes nothing.
 */
import { createHash, randomBytes } from 'node:crypto';
import { msInterval as ms, type Db } from '../shared/db/db.js';
import { newId, sha256Hex } from '../shared/ids.js';
import type { Logger } from '../shared/logger.js';
import { classify } from './classify.js';
import { audit } from '../domain/audit-log.js';
import { type ConnectionRepo } from './connection-repo.js';
import { parseAdvertiserTimeZone, parseTokenGrant, PlatformNotConfiguredError, type PlatformClient, type TokenGrant } from './platform-client.js';
import { tokenAad, type TokenCipher } from './token-cipher.js';

export const STATE_TTL_MS = 10 * 60_000;

export interface OAuthFlowDeps {
  readonly db: Db;
  readonly cipher: TokenCipher;
  readonly client: PlatformClient;
  readonly connections: ConnectionRepo;
  readonly logger: Logger;
  readonly publicBaseUrl: string;
  readonly authUrl: string;
  /** Called after a workspace connected (wakes the sender: parked conversions flow). */
  readonly onConnected?: (workspaceId: string) => void;
  readonly sleep?: (ms: number) => Promise<void>;
}

export type CallbackResult =
  | { readonly ok: true; readonly workspaceId: string; readonly advertiserId: string; readonly timeZone: string }
  | {
      readonly ok: false;
      /** 400: the link or the request is at fault; 502: the platform failed us. */
      readonly status: 400 | 502;
      readonly reason: 'other_browser' | 'missing_state' | 'unknown_state' | 'used_state' | 'superseded_state' | 'expired_state' | 'denied' | 'missing_code' | 'exchange_failed' | 'no_advertiser' | 'advertiser_failed';
      readonly message: string;
    };

export interface CallbackQuery {
  readonly state?: string;
  readonly auth_code?: string;
  readonly code?: string;
  readonly error?: string;
  readonly error_description?: string;
}

export class OAuthFlow {
  constructor(private readonly deps: OAuthFlowDeps) {}

  get redirectUri(): string {
    return `${this.deps.publicBaseUrl}/oauth/callback`;
  }

  /** The service's own connect link: opening it binds the flow to that browser, then goes on to the platform. */
  startUrl(state: string): string {
    return `${this.deps.publicBaseUrl}/oauth/start?state=${encodeURIComponent(state)}`;
  }

  /**
   * Begins a connection. `startUrl` is the link to open in a browser (it binds the flow to that browser);
   * `authorizeUrl` is the platform's page it leads to. With `binding`, the flow is bound at once (a caller that
   * is itself the browser's session, e.g. the console). Throws PlatformNotConfiguredError without an app.
   */
  async start(workspaceId: string, opts: { binding?: string } = {}): Promise<{ authorizeUrl: string; startUrl: string; state: string; expiresAt: Date }> {
    if (!this.deps.client.configured) throw new PlatformNotConfiguredError();
    const state = randomBytes(32).toString('base64url');
    const stateHash = sha256Hex(state);
    const verifier = randomBytes(48).toString('base64url');
    const expiresAt = await this.deps.db.transaction(async (tx) => {
      // A newer flow supersedes the workspace's open ones: only the latest link connects.
      await tx.query(
        `UPDATE oauth_states SET used_at = now(), outcome = 'superseded' WHERE workspace_id = $1 AND used_at IS NULL`,
        [workspaceId],
      );
      const r = await tx.query<{ expires_at: unknown }>(
        `INSERT INTO oauth_states (state_hash, workspace_id, flow_id, code_verifier_enc, redirect_uri, expires_at, binding_hash)
         VALUES ($1, $2, $3, $4, $5, now() + ${ms('$6')}, $7)
         RETURNING expires_at`,
        [
          stateHash,
          workspaceId,
          newId('flow'),
          this.deps.cipher.seal(verifier, tokenAad.verifier(stateHash)),
          this.redirectUri,
          STATE_TTL_MS,
          opts.binding === undefined ? null : sha256Hex(opts.binding),
        ],
      );
      // Old states are kept a day for clear "expired / already used" pages, then forgotten.
      await tx.query(`DELETE FROM oauth_states WHERE created_at < now() - interval '1 day'`);
      return new Date(r.rows[0]!.expires_at as string);
    });
    return { authorizeUrl: this.platformUrl(state, verifier), startUrl: this.startUrl(state), state, expiresAt };
  }

  private platformUrl(state: string, verifier: string): string {
    return tiktokAuthorizeUrl(this.deps.authUrl, this.deps.client.appId, state, this.redirectUri, verifier);
  }

  /**
   * Binds an open state to the browser that opened the connect link (`binding`: the random value of its cookie)
   * and gives the platform's authorize URL. The same browser may open the link again; another one is refused.
   */
  async bind(state: string, binding: string): Promise<{ ok: true; authorizeUrl: string } | Extract<CallbackResult, { ok: false }>> {
    if (state === '' || state.length > 512) {
      return { ok: false, status: 400, reason: 'missing_state', message: 'The link has no valid state parameter.' };
    }
    const stateHash = sha256Hex(state);
    const r = await this.deps.db.query<{ code_verifier_enc: string }>(
      `UPDATE oauth_states SET binding_hash = $2
       WHERE state_hash = $1 AND used_at IS NULL AND expires_at > now() AND (binding_hash IS NULL OR binding_hash = $2)
       RETURNING code_verifier_enc`,
      [stateHash, sha256Hex(binding)],
    );
    const row = r.rows[0];
    if (!row) return this.refusal(stateHash);
    const verifier = this.deps.cipher.open(row.code_verifier_enc, tokenAad.verifier(stateHash));
    return { ok: true, authorizeUrl: this.platformUrl(state, verifier) };
  }

  /** Handles the platform's redirect back to /oauth/callback. */
  async complete(q: CallbackQuery, binding?: string): Promise<CallbackResult> {
    const { db, cipher, client, connections, logger } = this.deps;
    const state = typeof q.state === 'string' ? q.state : '';
    if (state === '' || state.length > 512) {
      return { ok: false, status: 400, reason: 'missing_state', message: 'The link has no valid state parameter.' };
    }
    const stateHash = sha256Hex(state);
    // Only from the browser that opened the connect link; a foreign browser leaves the state unused.
    const claimed = await db.query<{ workspace_id: string; code_verifier_enc: string }>(
      `UPDATE oauth_states SET used_at = now()
       WHERE state_hash = $1 AND used_at IS NULL AND expires_at > now() AND binding_hash IS NOT NULL AND binding_hash = $2
       RETURNING workspace_id, code_verifier_enc`,
      [stateHash, binding === undefined || binding === '' ? '' : sha256Hex(binding)],
    );
    const claim = claimed.rows[0];
    if (!claim) return this.refusal(stateHash);
    const ws = claim.workspace_id;
    const log = logger.child({ workspace: ws });
    const fail = async (
      status: 400 | 502,
      reason: Extract<CallbackResult, { ok: false }>['reason'],
      message: string,
      outcome: 'failed' | 'denied' = 'failed',
    ): Promise<CallbackResult> => {
      await db.query('UPDATE oauth_states SET outcome = $2 WHERE state_hash = $1', [stateHash, outcome]);
      log.warn({ reason }, 'connecting the ad account failed');
      return { ok: false, status, reason, message };
    };

    if (q.error) {
      const why = (q.error_description || q.error).slice(0, 200);
      return fail(400, 'denied', `The platform reports that access was not granted: ${why}`, 'denied');
    }
    const authCode = q.auth_code || q.code;
    if (!authCode) return fail(400, 'missing_code', 'The platform sent no authorization code.');

    const verifier = cipher.open(claim.code_verifier_enc, tokenAad.verifier(stateHash));
    const connected = await connectTiktok({ client, logger: log, sleep: this.deps.sleep }, authCode, verifier);
    if (!connected.ok) return fail(connected.status, connected.reason, connected.message);
    const { grant, advertiserId, timeZone } = connected;

    await db.transaction(async (tx) => {
      await connections.storeConnected(tx, { workspaceId: ws, advertiserId, timeZone, grant });
      await tx.query(`UPDATE oauth_states SET outcome = 'connected' WHERE state_hash = $1`, [stateHash]);
      await audit(tx, ws, 'connection.connected', { advertiser_id: advertiserId, time_zone: timeZone }, 'oauth');
    });
    log.info({ advertiser_id: advertiserId, time_zone: timeZone, expires_in: grant.expiresIn }, 'ad account connected');
    this.deps.onConnected?.(ws);
    return { ok: true, workspaceId: ws, advertiserId, timeZone };
  }

  private async refusal(stateHash: string): Promise<Extract<CallbackResult, { ok: false }>> {
    const r = await this.deps.db.query<{ used: boolean; expired: boolean; outcome: string | null }>(
      'SELECT used_at IS NOT NULL AS used, expires_at <= now() AS expired, outcome FROM oauth_states WHERE state_hash = $1',
      [stateHash],
    );
    const row = r.rows[0];
    if (!row) {
      return {
        ok: false,
        status: 400,
        reason: 'unknown_state',
        message: 'This link was not issued by this service, or it is too old. Start connecting again from the workspace settings.',
      };
    }
    if (row.outcome === 'superseded') {
      return {
        ok: false,
        status: 400,
        reason: 'superseded_state',
        message: 'A newer connection attempt (or a disconnect) replaced this link. Use the latest link, or start again.',
      };
    }
    if (row.used) {
      return { ok: false, status: 400, reason: 'used_state', message: 'This link was already used. Start connecting again if needed.' };
    }
    if (!row.expired) {
      return {
        ok: false,
        status: 400,
        reason: 'other_browser',
        message:
          'This connection was started in another browser. Open the connect link (authorize_url) in the browser you finish in, or start connecting again from the workspace settings.',
      };
    }
    return {
      ok: false,
      status: 400,
      reason: 'expired_state',
      message: 'This link expired: it is valid for 10 minutes. Start connecting again from the workspace settings.',
    };
  }
}

/** The platform's authorize page for a flow: the app, the state, the redirect and the PKCE S256 challenge. */
export function tiktokAuthorizeUrl(authUrl: string, appId: string, state: string, redirectUri: string, verifier: string): string {
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  const url = new URL(authUrl);
  url.searchParams.set('app_id', appId);
  url.searchParams.set('state', state);
  url.searchParams.set('redirect_uri', redirectUri);
  url.searchParams.set('code_challenge', challenge);
  url.searchParams.set('code_challenge_method', 'S256');
  return url.toString();
}

export type TiktokConnection =
  | { readonly ok: true; readonly grant: TokenGrant; readonly advertiserId: string; readonly timeZone: string }
  | { readonly ok: false; readonly status: 400 | 502; readonly reason: 'exchange_failed' | 'no_advertiser' | 'advertiser_failed'; readonly message: string };

/**
 * A TikTok authorization code for a grant, its first advertiser and that advertiser's time zone; a grant that will
 * not be kept (no advertiser, unreadable settings) is handed back to the platform. Serves the workspace's
 * connection and every TikTok destination's.
 */
export async function connectTiktok(
  deps: { readonly client: PlatformClient; readonly logger: Logger; readonly sleep?: (ms: number) => Promise<void> },
  authCode: string,
  verifier: string,
): Promise<TiktokConnection> {
  const { client } = deps;
  const exchanged = await client.exchangeCode(authCode, verifier);
  const c = classify(exchanged);
  if (c.kind !== 'ok') {
    return { ok: false, status: 502, reason: 'exchange_failed', message: `The platform did not accept the authorization (${exchanged.code ?? 'no code'}: ${exchanged.message}).` };
  }
  const grant = parseTokenGrant(exchanged.data);
  if (typeof grant === 'string') return { ok: false, status: 502, reason: 'exchange_failed', message: `The platform's answer could not be read (${grant}).` };
  const advertiserId = grant.advertiserIds[0];
  if (advertiserId === undefined) {
    await revokeQuietly(deps, grant.accessToken);
    return { ok: false, status: 400, reason: 'no_advertiser', message: 'The authorization granted access to no ad account. Connect again and select an ad account.' };
  }
  const timeZone = await advertiserTimeZone(deps, grant.accessToken, advertiserId);
  if (typeof timeZone !== 'string') {
    await revokeQuietly(deps, grant.accessToken);
    return { ok: false, status: 502, reason: 'advertiser_failed', message: `The ad account's settings could not be read (${timeZone.error}).` };
  }
  return { ok: true, grant, advertiserId, timeZone };
}

/** Reads the advertiser's time zone, retrying a transient failure twice. */
async function advertiserTimeZone(
  deps: { readonly client: PlatformClient; readonly sleep?: (ms: number) => Promise<void> },
  accessToken: string,
  advertiserId: string,
): Promise<string | { error: string }> {
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  let last = '';
  for (let attempt = 0; attempt < 3; attempt++) {
    if (attempt > 0) await sleep(250 * attempt);
    const a = await deps.client.advertiserInfo(accessToken, [advertiserId]);
    const c = classify(a);
    if (c.kind === 'ok') return parseAdvertiserTimeZone(a.data, advertiserId);
    last = `${a.code ?? 'no code'}: ${a.message}`;
    if (c.kind !== 'retry') break;
  }
  return { error: last };
}

/** A grant we will not keep is handed back to the platform (best effort). */
async function revokeQuietly(deps: { readonly client: PlatformClient; readonly logger: Logger }, accessToken: string): Promise<void> {
  const a = await deps.client.revoke(accessToken);
  if (classify(a).kind !== 'ok') deps.logger.warn({ code: a.code }, 'could not revoke an unused grant');
}
