/**
 * The Activity page's "Deliveries" section: the workspace's delivery records (forwarder/delivery-repo.ts) under the
 * filter form's destination, outcome and days (UTC), the latest 50; and which of the shown ones an owner's "Redrive
 * shown" sends again (the dead and refused ones).
 */
import { toNumber, type Db } from '../../shared/db/db.js';
import { DELIVERY_OUTCOMES, DeliveryRepo, TIKTOK_DESTINATION_ID, type Delivery, type DeliveryFilter, type DeliveryOutcome } from '../../forwarder/delivery-repo.js';

const SHOWN = 50;
const DAY = /^\d{4}-\d{2}-\d{2}$/;

/** The filter form's fields as the query string carries them. */
export interface DeliveryForm {
  readonly d_destination?: string | string[];
  readonly d_outcome?: string | string[];
  readonly d_from?: string | string[];
  readonly d_to?: string | string[];
}

export interface DeliveryRow {
  readonly id: number;
  readonly eventId: string;
  readonly destination: string;
  readonly outcome: DeliveryOutcome;
  readonly attempts: number;
  readonly matchQuality: string;
  readonly matchKeys: string;
  readonly answer: string;
  readonly attemptedAt: string;
  readonly redrivable: boolean;
}

export interface DeliveriesSection {
  readonly destinations: Array<{ id: string; label: string }>;
  readonly outcomes: readonly DeliveryOutcome[];
  /** The form's values as given back to it. */
  readonly values: { destination: string; outcome: string; from: string; to: string };
  readonly rows: DeliveryRow[];
  /** Why a field of the form was not applied. */
  readonly problem: string | null;
  /** The form's query, to come back to after a redrive. */
  readonly query: string;
}

const one = (v: string | string[] | undefined): string => (Array.isArray(v) ? (v[0] ?? '') : (v ?? '')).trim();

function answerText(a: unknown): string {
  if (typeof a !== 'object' || a === null) return '—';
  const { code, http_status: status, message } = a as { code?: unknown; http_status?: unknown; message?: unknown };
  const head = typeof code === 'number' ? String(code) : typeof status === 'number' && status > 0 ? `HTTP ${status}` : '';
  return [head, typeof message === 'string' ? message : ''].filter((s) => s !== '').join(': ') || '—';
}

function row(d: Delivery, labels: Map<string, string>): DeliveryRow {
  return {
    id: d.id,
    eventId: d.eventId,
    destination: labels.get(d.destination) ?? d.destination,
    outcome: d.outcome,
    attempts: d.attempts,
    matchQuality: d.matchQuality.toFixed(1),
    matchKeys: d.matchKeys.length === 0 ? '—' : d.matchKeys.join(', '),
    answer: answerText(d.platformAnswer),
    attemptedAt: d.attemptedAt,
    redrivable: d.outcome === 'dead' || d.outcome === 'refused',
  };
}

/** The section as the form asks for it; a field that is not valid is left out and said so. */
export async function readDeliveries(db: Db, workspaceId: string, form: DeliveryForm): Promise<DeliveriesSection> {
  const dests = await db.query<{ id: string; kind: string; name: string }>('SELECT id, kind, name FROM destinations WHERE workspace_id = $1 ORDER BY created_at, id', [
    workspaceId,
  ]);
  const destinations = [{ id: TIKTOK_DESTINATION_ID, label: 'TikTok' }, ...dests.rows.map((d) => ({ id: d.id, label: `${d.name} (${d.kind})` }))];
  const labels = new Map(destinations.map((d) => [d.id, d.label]));
  const values = { destination: one(form.d_destination), outcome: one(form.d_outcome), from: one(form.d_from), to: one(form.d_to) };
  const problems: string[] = [];
  const filter: { -readonly [K in keyof DeliveryFilter]: DeliveryFilter[K] } = {};
  if (values.destination !== '') {
    if (labels.has(values.destination)) filter.destination = values.destination;
    else problems.push('Destination: pick one of the list.');
  }
  if (values.outcome !== '') {
    if ((DELIVERY_OUTCOMES as readonly string[]).includes(values.outcome)) filter.outcome = values.outcome as DeliveryOutcome;
    else problems.push(`Outcome: pick one of ${DELIVERY_OUTCOMES.join(', ')}.`);
  }
  const day = (name: string, v: string): number | undefined => {
    if (v === '') return undefined;
    const ms = DAY.test(v) ? Date.parse(`${v}T00:00:00Z`) : Number.NaN;
    if (Number.isNaN(ms)) problems.push(`${name}: give a day as YYYY-MM-DD.`);
    return Number.isNaN(ms) ? undefined : ms;
  };
  filter.from = day('From', values.from);
  const to = day('To', values.to);
  // "To" is a whole day: everything up to its end.
  filter.to = to === undefined ? undefined : to + 86_400_000;
  if (filter.from !== undefined && filter.to !== undefined && filter.from >= filter.to) {
    problems.push('To: pick a day on or after From.');
    filter.to = undefined;
  }
  const list = await new DeliveryRepo(db).list(workspaceId, filter, { limit: SHOWN });
  const query = new URLSearchParams(Object.entries({ d_destination: values.destination, d_outcome: values.outcome, d_from: values.from, d_to: values.to }).filter(([, v]) => v !== '')).toString();
  return {
    destinations,
    outcomes: DELIVERY_OUTCOMES,
    values,
    rows: list.map((d) => row(d, labels)),
    problem: problems.length > 0 ? problems.join(' ') : null,
    query,
  };
}

/** The delivery ids a "Redrive shown" form sent, each a plausible id. */
export function deliveryIdsOf(v: string | string[] | undefined): number[] {
  return (Array.isArray(v) ? v : v === undefined ? [] : [v]).filter((id) => /^\d{1,15}$/.test(id.trim())).map((id) => Number(id.trim()));
}

/** The filter query a redrive form carries back, rebuilt from its own known fields only. */
export function backQuery(body: DeliveryForm): string {
  const q = new URLSearchParams();
  for (const k of ['d_destination', 'd_outcome', 'd_from', 'd_to'] as const) {
    const v = one(body[k]);
    if (v !== '') q.set(k, v.slice(0, 100));
  }
  const s = q.toString();
  return s === '' ? '' : `?${s}`;
}

/** One destination's recent deliveries: how many of each outcome, and its latest attempt. */
export interface RecentOutcomes {
  readonly counts: Record<DeliveryOutcome, number>;
  readonly last: { readonly at: string; readonly outcome: DeliveryOutcome } | null;
}

/** Per destination id, its deliveries last attempted in the last `days` days (the Destinations page). */
export async function recentOutcomes(db: Db, workspaceId: string, days: number): Promise<Map<string, RecentOutcomes>> {
  const r = await db.query<{ destination_id: string; outcome: DeliveryOutcome; n: unknown; last: Date | string }>(
    `SELECT destination_id, outcome, count(*) AS n, max(attempted_at) AS last FROM deliveries
     WHERE workspace_id = $1 AND attempted_at >= now() - $2::double precision * interval '1 day' GROUP BY 1, 2`,
    [workspaceId, days],
  );
  const out = new Map<string, { counts: Record<DeliveryOutcome, number>; last: { at: string; outcome: DeliveryOutcome } | null }>();
  for (const row of r.rows) {
    const d = out.get(row.destination_id) ?? { counts: { sent: 0, refused: 0, retrying: 0, dead: 0 }, last: null };
    d.counts[row.outcome] = toNumber(row.n);
    const at = new Date(row.last).toISOString();
    if (d.last === null || at > d.last.at) d.last = { at, outcome: row.outcome };
    out.set(row.destination_id, d);
  }
  return out;
}
