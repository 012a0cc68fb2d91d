/**
 * The workspace's destinations beyond its first TikTok one (that one stays `forwarding_setups` + `connections`):
 * each row holds its kind, name, setup, connection (token sealed with TokenCipher, bound to the destination), and
 * the sender's lease and backoff; each destination has its own outbox and sent ledger. As for connections, every
 * write after slow work is guarded by the destination's `generation`, so a disconnect or reconnect wins over
 * work begun before it.
 */
import { recordActivity } from '../../domain/activity.js';
import type { PlatformEventRecord } from '../../domain/conversion.js';
import { msInterval as ms, toNumber, type Db, type Sql } from '../../shared/db/db.js';
import { newId } from '../../shared/ids.js';
import type { ConnectionStatus } from '../connection-repo.js';
import { conversionLetter, deadLetterExpired, sourceEventOf, writeConversionLetters } from '../outbox-repo.js';
import type { BatchGroup } from './kind.js';
import { readyGroupsSql, type OutboxShape } from '../outbox-ready.js';
import type { TokenCipher } from '../token-cipher.js';
import type { DestinationKindName } from './kind.js';

export interface Destination {
  readonly id: string;
  readonly workspaceId: string;
  readonly kind: DestinationKindName;
  readonly name: string;
  readonly setup: DestinationSetup;
  readonly status: ConnectionStatus;
  readonly statusReason: string | null;
  readonly accountId: string | null;
  /** The ad account's IANA time zone, for kinds that read it when connecting (tiktok); else null. */
  readonly timeZone: string | null;
  readonly accessExpiresAt: Date | null;
  readonly connectedAt: Date | null;
}

/** Every kind's setup names the sender's events it forwards and the platform event each becomes. */
export interface DestinationSetup {
  readonly events: ReadonlyArray<{ readonly name: string; readonly platform_event: string }>;
  readonly test_event_code?: string;
  readonly pixel_id?: string;
  readonly [key: string]: unknown;
}

export interface LeasedDestination {
  readonly destination: Destination;
  readonly generation: number;
  readonly accessToken: string;
}

/** A conversion waiting for one destination. */
export interface DestinationRow {
  readonly id: number;
  readonly destinationId: string;
  readonly workspaceId: string;
  /** The ledger id (test conversions carry a `test:` prefix). */
  readonly eventId: string;
  readonly record: PlatformEventRecord;
  readonly receivedAt: number;
  readonly requestId: string | null;
}

/** A destination's outbox: its batches split by pixel (or account) and test code (index destination_outbox_batch). */
const DESTINATION_OUTBOX: OutboxShape = { table: 'destination_outbox', key: 'destination_id', groups: ['event_source_id', 'test_event_code'] };

const toDate = (v: unknown): Date | null => (v === null || v === undefined ? null : new Date(v as string));
const aad = (destinationId: string): string => `${destinationId}:access`;
const refreshAad = (destinationId: string): string => `${destinationId}:refresh`;

interface Row {
  id: string;
  workspace_id: string;
  kind: DestinationKindName;
  name: string;
  setup: DestinationSetup;
  status: ConnectionStatus;
  status_reason: string | null;
  account_id: string | null;
  time_zone: string | null;
  access_expires_at: unknown;
  connected_at: unknown;
}
const COLUMNS = 'id, workspace_id, kind, name, setup, status, status_reason, account_id, time_zone, access_expires_at, connected_at';
const view = (r: Row): Destination => ({
  id: r.id,
  workspaceId: r.workspace_id,
  kind: r.kind,
  name: r.name,
  setup: typeof r.setup === 'string' ? JSON.parse(r.setup) : r.setup,
  status: r.status,
  statusReason: r.status_reason,
  accountId: r.account_id,
  timeZone: r.time_zone,
  accessExpiresAt: toDate(r.access_expires_at),
  connectedAt: toDate(r.connected_at),
});

export class DestinationRepo {
  constructor(
    private readonly db: Db,
    private readonly cipher: TokenCipher,
  ) {}

  // ------------------------------------------------------------ the destinations themselves

  async create(workspaceId: string, kind: DestinationKindName, name: string, setup: DestinationSetup): Promise<Destination> {
    const r = await this.db.query<Row>(
      `INSERT INTO destinations (id, workspace_id, kind, name, setup) VALUES ($1, $2, $3, $4, $5::jsonb) RETURNING ${COLUMNS}`,
      [newId('dst'), workspaceId, kind, name, JSON.stringify(setup)],
    );
    return view(r.rows[0]!);
  }

  async list(workspaceId: string, sql: Sql = this.db): Promise<Destination[]> {
    const r = await sql.query<Row>(`SELECT ${COLUMNS} FROM destinations WHERE workspace_id = $1 ORDER BY created_at, id`, [workspaceId]);
    return r.rows.map(view);
  }

  async get(workspaceId: string, id: string): Promise<Destination | undefined> {
    const r = await this.db.query<Row>(`SELECT ${COLUMNS} FROM destinations WHERE workspace_id = $1 AND id = $2`, [workspaceId, id]);
    return r.rows[0] ? view(r.rows[0]) : undefined;
  }

  async byId(id: string): Promise<Destination | undefined> {
    const r = await this.db.query<Row>(`SELECT ${COLUMNS} FROM destinations WHERE id = $1`, [id]);
    return r.rows[0] ? view(r.rows[0]) : undefined;
  }

  async update(workspaceId: string, id: string, name: string, setup: DestinationSetup): Promise<Destination | undefined> {
    const r = await this.db.query<Row>(
      `UPDATE destinations SET name = $3, setup = $4::jsonb, updated_at = now() WHERE workspace_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
      [workspaceId, id, name, JSON.stringify(setup)],
    );
    return r.rows[0] ? view(r.rows[0]) : undefined;
  }

  /** Removes a destination with its outbox and ledger; returns its access token (to revoke), or null. */
  async remove(workspaceId: string, id: string): Promise<{ found: boolean; accessToken: string | null; refreshToken: string | null }> {
    const r = await this.db.query<{ id: string; access_token_enc: string | null; refresh_token_enc: string | null }>(
      'DELETE FROM destinations WHERE workspace_id = $1 AND id = $2 RETURNING id, access_token_enc, refresh_token_enc',
      [workspaceId, id],
    );
    const row = r.rows[0];
    if (!row) return { found: false, accessToken: null, refreshToken: null };
    return { found: true, accessToken: this.openQuietly(id, row.access_token_enc), refreshToken: this.openQuietly(id, row.refresh_token_enc, refreshAad(id)) };
  }

  // ------------------------------------------------------------ the connection

  async storeConnected(
    id: string,
    c: { accessToken: string; expiresIn: number | undefined; accountId: string; refreshToken?: string; timeZone?: string },
  ): Promise<void> {
    await this.db.query(
      `UPDATE destinations SET status = 'connected', status_reason = NULL, account_id = $2, access_token_enc = $3, refresh_token_enc = $5,
              time_zone = $6,
              access_expires_at = CASE WHEN $4::double precision IS NULL THEN NULL ELSE now() + $4 * interval '1 second' END,
              generation = generation + 1, connected_at = now(), send_failures = 0, send_not_before = NULL,
              send_lease_owner = NULL, send_lease_until = NULL, updated_at = now()
       WHERE id = $1`,
      [
        id,
        c.accountId,
        this.cipher.seal(c.accessToken, aad(id)),
        c.expiresIn ?? null,
        c.refreshToken === undefined ? null : this.cipher.seal(c.refreshToken, refreshAad(id)),
        c.timeZone ?? null,
      ],
    );
  }

  /**
   * A renewed access token (and the refresh token, when the platform rotated it: the old one no longer works),
   * stored only while the connection it was renewed for still stands.
   */
  async storeRefreshed(id: string, generation: number, accessToken: string, expiresIn: number | undefined, refreshToken?: string): Promise<boolean> {
    const r = await this.db.query(
      `UPDATE destinations SET access_token_enc = $3, refresh_token_enc = COALESCE($5, refresh_token_enc),
              access_expires_at = CASE WHEN $4::double precision IS NULL THEN NULL ELSE now() + $4 * interval '1 second' END, updated_at = now()
       WHERE id = $1 AND generation = $2 AND status = 'connected' RETURNING id`,
      [id, generation, this.cipher.seal(accessToken, aad(id)), expiresIn ?? null, refreshToken === undefined ? null : this.cipher.seal(refreshToken, refreshAad(id))],
    );
    return r.rows.length === 1;
  }

  /**
   * Connected destinations with a refresh token whose access token expires within `leadMs` and that no one holds:
   * renewed in the background, so a destination without traffic keeps its grant alive (refresh tokens expire too).
   */
  async dueForRefresh(leadMs: number, limit: number): Promise<string[]> {
    const r = await this.db.query<{ id: string }>(
      `SELECT id FROM destinations
       WHERE status = 'connected' AND refresh_token_enc IS NOT NULL AND access_expires_at IS NOT NULL
         AND access_expires_at <= now() + ${ms(leadMs)}
         AND (send_not_before IS NULL OR send_not_before <= now())
         AND (send_lease_until IS NULL OR send_lease_until < now())
       ORDER BY access_expires_at LIMIT $1`,
      [limit],
    );
    return r.rows.map((row) => row.id);
  }

  /** The refresh token of a destination (null: none, or it does not open under today's key). */
  async refreshToken(id: string): Promise<string | null> {
    const r = await this.db.query<{ refresh_token_enc: string | null }>('SELECT refresh_token_enc FROM destinations WHERE id = $1', [id]);
    const sealed = r.rows[0]?.refresh_token_enc ?? null;
    if (sealed === null) return null;
    try {
      return this.cipher.open(sealed, refreshAad(id));
    } catch {
      return null;
    }
  }

  /**
   * Stored credentials deleted, forwarding stopped: the waiting conversions are dropped (they would go out under
   * a connection the advertiser ended). Returns the token to revoke, or null when there was none.
   */
  async disconnect(id: string): Promise<{ accessToken: string | null; refreshToken: string | null; dropped: number }> {
    return this.db.transaction(async (tx) => {
      const r = await tx.query<{ access_token_enc: string | null; refresh_token_enc: string | null; workspace_id: string }>(
        'SELECT access_token_enc, refresh_token_enc, workspace_id FROM destinations WHERE id = $1 FOR UPDATE',
        [id],
      );
      const row = r.rows[0];
      if (!row) return { accessToken: null, refreshToken: null, dropped: 0 };
      await tx.query(
        `UPDATE destinations SET status = 'disconnected', status_reason = 'disconnected by an admin', access_token_enc = NULL, refresh_token_enc = NULL,
                access_expires_at = NULL, generation = generation + 1, send_lease_owner = NULL, send_lease_until = NULL,
                updated_at = now()
         WHERE id = $1`,
        [id],
      );
      const d = await tx.query('DELETE FROM destination_outbox WHERE destination_id = $1 RETURNING id', [id]);
      if (d.rows.length > 0) await recordActivity(tx, [{ workspaceId: row.workspace_id, kind: 'dropped', key: 'disconnected', n: d.rows.length }]);
      return {
        accessToken: this.openQuietly(id, row.access_token_enc),
        refreshToken: this.openQuietly(id, row.refresh_token_enc, refreshAad(id)),
        dropped: d.rows.length,
      };
    });
  }

  /** The platform refused the token and it cannot be renewed: parked until the advertiser authorises again. */
  async markNeedsReauth(id: string, generation: number, reason: string): Promise<boolean> {
    const r = await this.db.query(
      `UPDATE destinations SET status = 'needs_reauth', status_reason = $3, send_lease_owner = NULL, send_lease_until = NULL, updated_at = now()
       WHERE id = $1 AND generation = $2 AND status = 'connected' RETURNING id`,
      [id, generation, reason.slice(0, 500)],
    );
    return r.rows.length === 1;
  }

  private openQuietly(id: string, sealed: string | null, associated = aad(id)): string | null {
    if (sealed === null) return null;
    try {
      return this.cipher.open(sealed, associated);
    } catch {
      return null; // unreadable under today's key: nothing we could revoke with
    }
  }

  // ------------------------------------------------------------ the sender's lease and backoff

  /**
   * Destinations that may send now and have a batch ready (a full batch, or one that lingered long enough).
   * `draining`: the destinations this sender drains already, left out before their outboxes are looked at.
   */
  async sendable(owner: string, limit: number, lingerMs: number, batchSize: number, draining: readonly string[]): Promise<string[]> {
    const r = await this.db.query<{ id: string }>(
      `SELECT d.id FROM destinations d
       WHERE d.status = 'connected' AND d.access_token_enc IS NOT NULL
         AND (d.send_not_before IS NULL OR d.send_not_before <= now())
         AND (d.send_lease_until IS NULL OR d.send_lease_until < now() OR d.send_lease_owner = $1)
         AND d.id <> ALL($4::text[])
         AND EXISTS (${readyGroupsSql(DESTINATION_OUTBOX, 'd.id', ms(lingerMs), '$3')})
       ORDER BY d.send_not_before NULLS FIRST LIMIT $2`,
      [owner, limit, batchSize, draining],
    );
    return r.rows.map((row) => row.id);
  }

  async leaseForSending(id: string, owner: string, leaseMs: number): Promise<LeasedDestination | null> {
    const r = await this.db.query<Row & { generation: unknown; access_token_enc: string }>(
      `UPDATE destinations SET send_lease_owner = $2, send_lease_until = now() + ${ms(leaseMs)}
       WHERE id = $1 AND status = 'connected' AND access_token_enc IS NOT NULL
         AND (send_not_before IS NULL OR send_not_before <= now())
         AND (send_lease_until IS NULL OR send_lease_until < now() OR send_lease_owner = $2)
       RETURNING ${COLUMNS}, generation, access_token_enc`,
      [id, owner],
    );
    const row = r.rows[0];
    if (!row) return null;
    const generation = toNumber(row.generation);
    const token = this.openQuietly(id, row.access_token_enc);
    if (token === null) {
      await this.markNeedsReauth(id, generation, 'stored credentials do not open with CREDENTIALS_KEY');
      return null;
    }
    return { destination: view(row), generation, accessToken: token };
  }

  async renewSendLease(id: string, owner: string, generation: number, leaseMs: number): Promise<boolean> {
    const r = await this.db.query(
      `UPDATE destinations SET send_lease_until = now() + ${ms(leaseMs)}
       WHERE id = $1 AND send_lease_owner = $2 AND generation = $3 AND status = 'connected' RETURNING id`,
      [id, owner, generation],
    );
    return r.rows.length === 1;
  }

  async releaseSendLease(id: string, owner: string): Promise<void> {
    await this.db.query('UPDATE destinations SET send_lease_owner = NULL, send_lease_until = NULL WHERE id = $1 AND send_lease_owner = $2', [id, owner]);
  }

  async sendBackoff(id: string, delayMs: number, generation?: number): Promise<void> {
    await this.db.query(
      `UPDATE destinations SET send_failures = send_failures + 1, send_not_before = now() + ${ms(delayMs)}
       WHERE id = $1 AND ($2::integer IS NULL OR generation = $2)`,
      [id, generation ?? null],
    );
  }

  async sendFailures(id: string): Promise<number> {
    const r = await this.db.query<{ send_failures: unknown }>('SELECT send_failures FROM destinations WHERE id = $1', [id]);
    return r.rows[0] ? toNumber(r.rows[0].send_failures) : 0;
  }

  // ------------------------------------------------------------ the outbox and the ledger

  async readyGroup(id: string, lingerMs: number, batchSize: number): Promise<BatchGroup | null> {
    const r = await this.db.query<{ event_source_id: string; test_event_code: string }>(
      `${readyGroupsSql(DESTINATION_OUTBOX, '$1', ms(lingerMs), '$2')} ORDER BY first_id LIMIT 1`,
      [id, batchSize],
    );
    const row = r.rows[0];
    return row ? { eventSource: '', eventSourceId: row.event_source_id, testEventCode: row.test_event_code } : null;
  }

  async take(id: string, group: BatchGroup, limit: number): Promise<DestinationRow[]> {
    const r = await this.db.query<{ id: unknown; workspace_id: string; event_id: string; record: PlatformEventRecord; received_at: unknown; request_id: string | null }>(
      `SELECT id, workspace_id, event_id, record, received_at, request_id FROM destination_outbox
       WHERE destination_id = $1 AND event_source_id = $2 AND test_event_code = $3 ORDER BY id LIMIT $4`,
      [id, group.eventSourceId, group.testEventCode, limit],
    );
    return r.rows.map((row) => ({
      id: toNumber(row.id),
      destinationId: id,
      workspaceId: row.workspace_id,
      eventId: row.event_id,
      record: row.record,
      receivedAt: new Date(row.received_at as string).getTime(),
      requestId: row.request_id,
    }));
  }

  /** The platform took the batch: out of the outbox, into the destination's ledger, with the backoff reset. */
  async recordSent(id: string, generation: number, rows: readonly DestinationRow[], requestId: string | null, testEventCode: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.query('DELETE FROM destination_outbox WHERE id = ANY($1::bigint[])', [rows.map((r) => r.id)]);
      await tx.query(
        `INSERT INTO destination_sent (destination_id, event_id, request_id) SELECT $1, e, $3 FROM unnest($2::text[]) AS t(e)
         ON CONFLICT (destination_id, event_id) DO UPDATE SET sent_at = now(), request_id = EXCLUDED.request_id`,
        [id, rows.map((r) => r.eventId), requestId],
      );
      await tx.query('UPDATE destinations SET send_failures = 0, send_not_before = NULL WHERE id = $1 AND generation = $2 AND send_failures <> 0', [id, generation]);
      await recordActivity(tx, [{ workspaceId: rows[0]!.workspaceId, kind: testEventCode === '' ? 'delivered' : 'test_delivered', n: rows.length }]);
    });
  }

  /** Forgets ledger entries older than the retention (at least the platforms' deduplication windows). */
  async purgeLedger(retentionMs: number): Promise<number> {
    const r = await this.db.query(`DELETE FROM destination_sent WHERE sent_at < now() - ${ms(retentionMs)} RETURNING event_id`);
    return r.rows.length;
  }

  /** Drops conversions that waited longer than maxAgeMs (a destination never (re)connected); counts per workspace. */
  async expireOld(maxAgeMs: number, now = Date.now()): Promise<Array<{ workspaceId: string; kind: DestinationKindName; n: number }>> {
    return this.db.transaction(async (tx) => {
      const r = await tx.query<{
        workspace_id: string;
        kind: DestinationKindName;
        destination_id: string;
        event_id: string;
        record: PlatformEventRecord;
        event_source_id: string;
        test_event_code: string;
        setup: DestinationSetup | string;
      }>(
        `DELETE FROM destination_outbox o USING destinations d
         WHERE o.destination_id = d.id AND o.enqueued_at < now() - ${ms(maxAgeMs)}
         RETURNING o.workspace_id, d.kind, o.destination_id, o.event_id, o.record, o.event_source_id, o.test_event_code, d.setup`,
      );
      await deadLetterExpired(
        tx,
        r.rows.map((row) => ({
          workspaceId: row.workspace_id,
          destinationId: row.destination_id,
          eventId: row.event_id,
          record: row.record,
          eventSource: row.kind,
          eventSourceId: row.event_source_id,
          testEventCode: row.test_event_code,
          sourceEvent: sourceEventOf({ events: (typeof row.setup === 'string' ? (JSON.parse(row.setup) as DestinationSetup) : row.setup).events }, row.record),
        })),
        now,
      );
      const out = new Map<string, { workspaceId: string; kind: DestinationKindName; n: number }>();
      for (const row of r.rows) {
        const k = `${row.workspace_id}\n${row.kind}`;
        out.set(k, { workspaceId: row.workspace_id, kind: row.kind, n: (out.get(k)?.n ?? 0) + 1 });
      }
      await recordActivity(tx, [...out.values()].map(({ workspaceId, n }) => ({ workspaceId, kind: 'dropped' as const, key: 'expired', n })));
      return [...out.values()];
    });
  }

  async bumpAttempts(rows: readonly DestinationRow[]): Promise<void> {
    await this.db.query('UPDATE destination_outbox SET attempts = attempts + 1 WHERE id = ANY($1::bigint[])', [rows.map((r) => r.id)]);
  }

  async withhold(rows: readonly DestinationRow[], reason: string): Promise<void> {
    if (rows.length === 0) return;
    await this.db.transaction(async (tx) => {
      await tx.query('DELETE FROM destination_outbox WHERE id = ANY($1::bigint[])', [rows.map((r) => r.id)]);
      await recordActivity(tx, [{ workspaceId: rows[0]!.workspaceId, kind: 'dropped', key: reason, n: rows.length }]);
    });
  }

  /**
   * The platform refused these for good: out of the outbox, onto conversions.dlq and into dead_letters. The
   * letter's origin names the destination, so the same event refused by two destinations makes two letters.
   */
  async deadLetter(
    destination: Destination,
    group: BatchGroup,
    rows: readonly DestinationRow[],
    platform: { code: number; message: string; requestId: string | null },
    now: number,
  ): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.query('DELETE FROM destination_outbox WHERE id = ANY($1::bigint[])', [rows.map((r) => r.id)]);
      await writeConversionLetters(
        tx,
        rows.map((row) => ({
          destinationId: destination.id,
          eventId: row.eventId,
          source: `destination ${destination.id} request ${platform.requestId ?? 'none'} at ${now}`,
          sourceEvent: sourceEventOf(destination.setup, row.record),
          value: conversionLetter(row.workspaceId, row.record, {
            reason: 'platform_rejected',
            event_source: destination.kind,
            event_source_id: group.eventSourceId,
            test_event_code: group.testEventCode === '' ? null : group.testEventCode,
            platform_code: platform.code,
            platform_message: `${destination.kind} destination ${destination.id}: ${platform.message}`,
            request_id: platform.requestId,
            failed_at: now,
          }),
        })),
      );
      await recordActivity(tx, [{ workspaceId: destination.workspaceId, kind: 'failed', key: String(platform.code), n: rows.length }]);
    });
  }
}
