/**
 * The console's destination form: the fields of each kind's setup, the form's values as that setup (checked by
 * the admin API's own `parseSetup`, so the console and the API accept exactly the same setups), and each problem
 * placed next to the field it is about.
 */
import type { DestinationKindName } from '../../forwarder/destinations/kind.js';
import { META_ACTION_SOURCES } from '../../forwarder/destinations/meta.js';
import type { DestinationSetup } from '../../forwarder/destinations/repo.js';
import { PLATFORM_EVENT_SOURCES, PLATFORM_EVENTS } from '../platform-events.js';
import { parseSetup } from '../routes/destinations.js';

type Form = Record<string, string | string[] | undefined>;

export const KIND_LABELS: Record<DestinationKindName, string> = { tiktok: 'TikTok', meta: 'Meta', google: 'Google Ads' };

/** Meta's standard events (its Conversions API takes custom names as well). */
const META_EVENTS = [
  'AddPaymentInfo', 'AddToCart', 'AddToWishlist', 'CompleteRegistration', 'Contact', 'CustomizeProduct', 'Donate', 'FindLocation',
  'InitiateCheckout', 'Lead', 'Purchase', 'Schedule', 'Search', 'StartTrial', 'SubmitApplication', 'Subscribe', 'ViewContent',
] as const;

export interface FieldSpec {
  readonly key: string;
  readonly label: string;
  readonly hint?: string;
  readonly type: 'text' | 'number' | 'select';
  readonly options?: ReadonlyArray<{ value: string; label: string }>;
  readonly optional?: boolean;
}

const opts = (values: readonly string[]) => values.map((v) => ({ value: v, label: v }));
const PII = { key: 'pii_mode', label: 'Personal data', type: 'select', options: [
  { value: 'hashed', label: 'hashed: forward hashed emails and phones' },
  { value: 'none', label: 'none: forward no personal data' },
] } as const satisfies FieldSpec;
const TEST_CODE = {
  key: 'test_event_code',
  label: 'Test event code (optional)',
  hint: "When set, events sent with a test key go to this destination with this code (and show in the platform's test events); live keys never carry it.",
  type: 'text',
  optional: true,
} as const satisfies FieldSpec;

/** Each kind's setup fields besides `events`, in the order the form shows them. */
export const KIND_FIELDS: Record<DestinationKindName, readonly FieldSpec[]> = {
  meta: [
    { key: 'pixel_id', label: 'Pixel (dataset) id', hint: 'Digits only, as Events Manager shows it.', type: 'text' },
    { key: 'action_source', label: 'Action source', hint: 'Where the conversions happen.', type: 'select', options: opts(META_ACTION_SOURCES) },
    PII,
    TEST_CODE,
  ],
  google: [
    { key: 'customer_id', label: 'Google Ads customer id', hint: '10 digits, no dashes.', type: 'text' },
    { key: 'login_customer_id', label: 'Manager account id (optional)', hint: 'The manager (MCC) account you connect with, when it is not the customer itself.', type: 'text', optional: true },
    { key: 'conversion_action_id', label: 'Conversion action id', hint: 'Digits: the conversion action the events are counted under.', type: 'text' },
    PII,
    TEST_CODE,
  ],
  tiktok: [
    { key: 'event_source', label: 'Event source', type: 'select', options: opts(PLATFORM_EVENT_SOURCES) },
    { key: 'event_source_id', label: 'Pixel id', hint: "The platform's pixel (event source) id conversions are reported to.", type: 'text' },
    PII,
    { key: 'click_window_days', label: 'Click window (days)', type: 'number' },
    TEST_CODE,
  ],
};

/** Suggestions for the platform event of each kind (free text all the same: the platform decides). */
export const KIND_EVENTS: Record<DestinationKindName, readonly string[]> = { tiktok: PLATFORM_EVENTS, meta: META_EVENTS, google: [] };

/** An empty setup as the form starts it. */
export function blankSetup(kind: DestinationKindName): Record<string, unknown> {
  if (kind === 'meta') return { pixel_id: '', action_source: 'website', pii_mode: 'hashed', events: [] };
  if (kind === 'google') return { customer_id: '', conversion_action_id: '', pii_mode: 'hashed', events: [] };
  return { event_source: 'WEB', event_source_id: '', pii_mode: 'hashed', click_window_days: 7, test_event_code: null, events: [] };
}

const one = (v: string | string[] | undefined): string => (Array.isArray(v) ? (v[0] ?? '') : (v ?? '')).trim();

/**
 * The events a form ticked (rows `name_i`/`on_i`/`to_i`, and `extra_name`/`extra_to`) and what is missing (a
 * ticked event without its platform event), by event name; `ticked` keeps those too, to show the form back.
 */
export function eventsFromForm(body: Form): {
  events: Array<{ name: string; platform_event: string }>;
  ticked: Array<{ name: string; platform_event: string }>;
  problems: Map<string, string>;
} {
  const ticked: Array<{ name: string; platform_event: string }> = [];
  const problems = new Map<string, string>();
  const add = (name: string, to: string, extra: boolean) => {
    ticked.push({ name, platform_event: to });
    if (to === '') problems.set(name, `Choose the platform event for "${name}"${extra ? '' : ', or untick it'}.`);
  };
  for (const field of Object.keys(body)) {
    const m = /^name_(\d+)$/.exec(field);
    if (m && one(body[`on_${m[1]}`]) === '1') add(one(body[field]), one(body[`to_${m[1]}`]), false);
  }
  const extraName = one(body.extra_name);
  if (extraName !== '') add(extraName, one(body.extra_to), true);
  return { events: ticked.filter((e) => e.platform_event !== ''), ticked, problems };
}

export interface ParsedForm {
  readonly name: string;
  /** The setup as the form gave it (shown back when it is not valid). */
  readonly shown: Record<string, unknown>;
  readonly setup?: DestinationSetup;
  /** Problems by field: a setup key, `name`, `events`, or `event:<event name>` for one event row. */
  readonly errors: Record<string, string>;
}

/** The name and setup a destination form sent, checked as the admin API checks them. */
export function destinationFromForm(kind: DestinationKindName, body: Form): ParsedForm {
  const errors: Record<string, string> = {};
  const name = one(body.dest_name);
  if (name === '' || name.length > 200) errors.name = 'Give a name of 1 to 200 characters, e.g. "Meta: main pixel".';
  const { events, ticked, problems } = eventsFromForm(body);
  for (const [event, message] of problems) errors[`event:${event}`] = message;
  const shown: Record<string, unknown> = {};
  for (const f of KIND_FIELDS[kind]) {
    const v = one(body[f.key]);
    if (f.type === 'number') shown[f.key] = /^\d+$/.test(v) ? Number(v) : v === '' ? Number.NaN : v;
    // An optional field left empty is absent (TikTok's test code: null, as its setup has it).
    else if (f.optional && v === '') {
      if (kind === 'tiktok') shown[f.key] = null;
    } else shown[f.key] = v;
  }
  shown.events = ticked;
  if (ticked.length === 0) errors.events = 'Tick at least one event to forward, or name one below.';
  if (Object.keys(errors).length > 0) return { name, shown, errors };
  const parsed = parseSetup(kind, { ...shown, events });
  if (parsed.ok) return { name, shown, setup: parsed.setup, errors };
  const issues = parsed.issues ?? [{ path: /^setup\.?([^:]*):/.exec(parsed.message)?.[1] ?? '', message: parsed.message.replace(/^setup[^:]*: /, '') }];
  for (const i of issues) {
    const [head, index] = i.path.split('.');
    const event = index === undefined ? undefined : events[Number(index)];
    const key = head === 'events' && event !== undefined ? `event:${event.name}` : head || 'form';
    errors[key] ??= sentence(i.message);
  }
  // "listed more than once" names the event, not a row.
  if (/more than once/.test(parsed.message)) errors.events = sentence(parsed.message.replace(/^setup\.events: /, ''));
  return { name, shown, errors };
}

/** A message as a sentence: capitalised, with a full stop. */
export const sentence = (m: string): string => {
  const s = m.charAt(0).toUpperCase() + m.slice(1);
  return /[.!?]$/.test(s) ? s : `${s}.`;
};

/** The event rows of the form: the names the workspace has sent, then the setup's others. */
export function eventRows(seen: ReadonlyArray<{ name: string; count: number }>, selected: ReadonlyArray<{ name: string; platform_event: string }>) {
  const mapped = new Map(selected.map((e) => [e.name, e.platform_event]));
  return [
    ...seen.map((e) => ({ name: e.name, count: e.count as number | null, on: mapped.has(e.name), to: mapped.get(e.name) ?? '' })),
    ...selected.filter((e) => !seen.some((s) => s.name === e.name)).map((e) => ({ name: e.name, count: null, on: true, to: e.platform_event })),
  ];
}
