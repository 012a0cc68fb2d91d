/**
 * Connecting a destination in the browser (Meta's dialog, Google's consent page, TikTok's authorize page for a second
 * TikTok destination), with the workspace flow's guarantees (../oauth-flow.ts): a one-time `state` stored only as its
 * hash, bound to the browser that opened the start link, valid 10 minutes, claimed once; the code is exchanged and
 * checked before anything is stored. TikTok's flow also carries a sealed PKCE verifier.
 */
import { randomBytes } from 'node:crypto';
import type { Db } from '../../shared/db/db.js';
import { sha256Hex } from '../../shared/ids.js';
import type { Logger } from '../../shared/logger.js';
import { GOOGLE_SCOPE, GoogleNotConfiguredError, parseGoogleGrant, type GoogleClient } from './google.js';
import { connectMeta, MetaNotConfiguredError, type MetaClient } from './meta.js';
import { connectTiktok, tiktokAuthorizeUrl } from '../oauth-flow.js';
import { PlatformNotConfiguredError, type PlatformClient } from '../platform-client.js';
import { tokenAad, type TokenCipher } from '../token-cipher.js';
import type { Destination, DestinationRepo } from './repo.js';

export const DESTINATION_STATE_TTL_MS = 10 * 60_000;
export const DESTINATION_CALLBACK_PATH = '/oauth/destination/callback';
export const DESTINATION_START_PATH = '/oauth/destination/start';

export class KindNotConnectableError extends Error {}

export type DestinationCallbackResult =
  | { readonly ok: true; readonly destinationId: string; readonly accountId: string }
  | { readonly ok: false; readonly status: number; readonly reason: string; readonly message: string };

export class DestinationFlow {
  constructor(
    private readonly deps: {
      readonly db: Db;
      readonly cipher: TokenCipher;
      readonly destinations: DestinationRepo;
      readonly tiktok: PlatformClient;
      readonly tiktokAuthUrl: string;
      readonly meta: MetaClient;
      readonly metaAuthUrl: string;
      readonly google: GoogleClient;
      readonly googleAuthUrl: string;
      readonly publicBaseUrl: string;
      readonly logger: Logger;
      readonly onConnected?: () => void;
    },
  ) {}

  get redirectUri(): string {
    return `${this.deps.publicBaseUrl}${DESTINATION_CALLBACK_PATH}`;
  }

  /** Begins connecting; `startUrl` is the service's link that binds the browser, then leads to the platform. */
  async start(d: Destination): Promise<{ startUrl: string; expiresAt: Date }> {
    this.requireConfigured(d.kind);
    const state = randomBytes(32).toString('base64url');
    const stateHash = sha256Hex(state);
    const verifier = d.kind === 'tiktok' ? this.deps.cipher.seal(randomBytes(48).toString('base64url'), tokenAad.verifier(stateHash)) : null;
    const expiresAt = new Date(Date.now() + DESTINATION_STATE_TTL_MS);
    await this.deps.db.transaction(async (tx) => {
      // A newer flow for the same destination supersedes any open one.
      await tx.query('UPDATE destination_oauth_states SET used_at = now() WHERE destination_id = $1 AND used_at IS NULL', [d.id]);
      await tx.query(
        `INSERT INTO destination_oauth_states (state_hash, destination_id, redirect_uri, expires_at, code_verifier_enc) VALUES ($1, $2, $3, $4, $5)`,
        [stateHash, d.id, this.redirectUri, expiresAt.toISOString(), verifier],
      );
      await tx.query(`DELETE FROM destination_oauth_states WHERE created_at < now() - interval '1 day'`);
    });
    return { startUrl: `${this.deps.publicBaseUrl}${DESTINATION_START_PATH}?state=${encodeURIComponent(state)}`, expiresAt };
  }

  private requireConfigured(kind: Destination['kind']): void {
    if (kind === 'meta' && !this.deps.meta.configured) throw new MetaNotConfiguredError();
    if (kind === 'google' && !this.deps.google.configured) throw new GoogleNotConfiguredError();
    if (kind === 'tiktok' && !this.deps.tiktok.configured) throw new PlatformNotConfiguredError();
    if (kind !== 'meta' && kind !== 'google' && kind !== 'tiktok') throw new KindNotConnectableError(`a ${kind} destination cannot be connected here`);
  }

  /** Binds an open state to this browser; the platform's dialog URL to send it to, or why not. */
  async bind(state: string, binding: string): Promise<{ ok: true; authorizeUrl: string } | Extract<DestinationCallbackResult, { ok: false }>> {
    if (state === '' || state.length > 512) return { ok: false, status: 400, reason: 'missing_state', message: 'The link has no valid state parameter.' };
    const r = await this.deps.db.query<{ destination_id: string; code_verifier_enc: string | null }>(
      `UPDATE destination_oauth_states SET binding_hash = $2
       WHERE state_hash = $1 AND used_at IS NULL AND expires_at > now() AND (binding_hash IS NULL OR binding_hash = $2)
       RETURNING destination_id, code_verifier_enc`,
      [sha256Hex(state), sha256Hex(binding)],
    );
    if (!r.rows[0]) return { ok: false, status: 400, reason: 'unknown_state', message: 'This link is unknown, used, expired or opened in another browser.' };
    const d = await this.deps.destinations.byId(r.rows[0].destination_id);
    if (!d) return { ok: false, status: 404, reason: 'unknown_destination', message: 'The destination was removed meanwhile.' };
    this.requireConfigured(d.kind);
    if (d.kind === 'tiktok') {
      const verifier = this.deps.cipher.open(r.rows[0].code_verifier_enc ?? '', tokenAad.verifier(sha256Hex(state)));
      return { ok: true, authorizeUrl: tiktokAuthorizeUrl(this.deps.tiktokAuthUrl, this.deps.tiktok.appId, state, this.redirectUri, verifier) };
    }
    const google = d.kind === 'google';
    const url = new URL(google ? this.deps.googleAuthUrl : this.deps.metaAuthUrl);
    url.searchParams.set('client_id', google ? this.deps.google.clientIdOrThrow() : this.deps.meta.appIdOrThrow());
    url.searchParams.set('redirect_uri', this.redirectUri);
    url.searchParams.set('state', state);
    url.searchParams.set('response_type', 'code');
    if (google) {
      // offline + consent: Google returns a refresh token on every grant, not only on the first.
      url.searchParams.set('scope', GOOGLE_SCOPE);
      url.searchParams.set('access_type', 'offline');
      url.searchParams.set('prompt', 'consent');
    } else {
      // What the Conversions API needs: sending events to the advertiser's datasets (pixels).
      url.searchParams.set('scope', 'ads_management,business_management');
    }
    return { ok: true, authorizeUrl: url.toString() };
  }

  async complete(q: Record<string, unknown>, binding: string | undefined): Promise<DestinationCallbackResult> {
    const state = typeof q.state === 'string' ? q.state : '';
    if (state === '' || state.length > 512) return { ok: false, status: 400, reason: 'missing_state', message: 'The link has no valid state parameter.' };
    if (binding === undefined) {
      return { ok: false, status: 400, reason: 'other_browser', message: 'Finish connecting in the browser where you opened the connect link.' };
    }
    // Claimed once, whatever follows: a replayed callback finds it used.
    const claimed = await this.deps.db.query<{ destination_id: string; redirect_uri: string; code_verifier_enc: string | null }>(
      `UPDATE destination_oauth_states SET used_at = now()
       WHERE state_hash = $1 AND used_at IS NULL AND expires_at > now() AND binding_hash = $2
       RETURNING destination_id, redirect_uri, code_verifier_enc`,
      [sha256Hex(state), sha256Hex(binding)],
    );
    const row = claimed.rows[0];
    if (!row) return { ok: false, status: 400, reason: 'unknown_state', message: 'This link is unknown, used, expired or opened in another browser.' };
    if (typeof q.error === 'string') {
      return { ok: false, status: 400, reason: 'denied', message: `The platform answered: ${String(q.error_description ?? q.error)}. Nothing was changed.` };
    }
    // TikTok names its code `auth_code`.
    const code = typeof q.code === 'string' && q.code !== '' ? q.code : typeof q.auth_code === 'string' ? q.auth_code : '';
    if (code === '') return { ok: false, status: 400, reason: 'missing_code', message: 'The platform sent no authorisation code.' };
    const d = await this.deps.destinations.byId(row.destination_id);
    if (!d) return { ok: false, status: 404, reason: 'unknown_destination', message: 'The destination was removed meanwhile.' };
    const grant =
      d.kind === 'google'
        ? await this.connectGoogle(code, row.redirect_uri, String(d.setup.customer_id ?? ''))
        : d.kind === 'tiktok'
          ? await this.connectTiktok(d, code, this.deps.cipher.open(row.code_verifier_enc ?? '', tokenAad.verifier(sha256Hex(state))))
          : await connectMeta(this.deps.meta, code, row.redirect_uri, String(d.setup.pixel_id ?? ''));
    if ('error' in grant) {
      this.deps.logger.warn({ destination: d.id, reason: grant.error }, 'destination connection failed');
      return { ok: false, status: 502, reason: 'exchange_failed', message: grant.error };
    }
    await this.deps.destinations.storeConnected(d.id, grant);
    this.deps.logger.info({ destination: d.id, workspace: d.workspaceId, account: grant.accountId }, 'destination connected');
    this.deps.onConnected?.();
    return { ok: true, destinationId: d.id, accountId: grant.accountId };
  }

  /** TikTok's code for a grant of one advertiser (its first), with that advertiser's time zone. */
  private async connectTiktok(
    d: Destination,
    code: string,
    verifier: string,
  ): Promise<{ accessToken: string; expiresIn: number | undefined; refreshToken?: string; accountId: string; timeZone: string } | { error: string }> {
    const c = await connectTiktok({ client: this.deps.tiktok, logger: this.deps.logger.child({ destination: d.id }) }, code, verifier);
    if (!c.ok) return { error: c.message };
    return {
      accessToken: c.grant.accessToken,
      expiresIn: c.grant.expiresIn,
      ...(c.grant.refreshToken === undefined ? {} : { refreshToken: c.grant.refreshToken }),
      accountId: c.advertiserId,
      timeZone: c.timeZone,
    };
  }

  /** Google's code for an access token and a refresh token; without a refresh token the grant is useless. */
  private async connectGoogle(
    code: string,
    redirectUri: string,
    customerId: string,
  ): Promise<{ accessToken: string; expiresIn: number | undefined; refreshToken: string; accountId: string } | { error: string }> {
    const g = parseGoogleGrant(await this.deps.google.exchangeCode(code, redirectUri));
    if ('error' in g) return { error: `code exchange refused: ${g.error}` };
    if (g.refreshToken === undefined) return { error: 'Google returned no refresh token (offline access was not granted)' };
    return { accessToken: g.accessToken, expiresIn: g.expiresIn, refreshToken: g.refreshToken, accountId: customerId };
  }
}
