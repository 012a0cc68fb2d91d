/**
 * The Conversions API's checks of a `POST /{pixel_id}/events` body, after Meta's public documentation (server
 * event parameters, customer information parameters, data processing options). Meta refuses the whole request
 * when one event is invalid and says what is wrong without saying which event: so does this.
 */
export const MAX_EVENTS = 1000;
/** event_time may be at most 7 days old. */
export const MAX_AGE_SECONDS = 7 * 24 * 3600;
/** A little clock skew into the future is tolerated. */
const MAX_FUTURE_SECONDS = 600;

export const ACTION_SOURCES = [
  'website',
  'app',
  'email',
  'phone_call',
  'chat',
  'physical_store',
  'system_generated',
  'business_messaging',
  'other',
] as const;

/** At least one of these must be in user_data for Meta to match the event to a person. */
const CUSTOMER_KEYS = ['em', 'ph', 'external_id', 'fbc', 'fbp', 'client_ip_address', 'subscription_id', 'fb_login_id', 'lead_id', 'madid', 'anon_id'];
/** Fields Meta requires hashed (SHA-256, lower-case hex). */
const HASHED_KEYS = ['em', 'ph', 'fn', 'ln', 'ge', 'db', 'ct', 'st', 'zp', 'country'];
const SHA256 = /^[0-9a-f]{64}$/;
const FBC = /^fb\.[0-2]\.\d{10,13}\..+$/;
const FBP = /^fb\.[0-2]\.\d{10,13}\.\d+$/;

export interface Invalid {
  readonly subcode: number;
  readonly title: string;
  readonly message: string;
}

const invalid = (subcode: number, title: string, message: string): Invalid => ({ subcode, title, message });
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function checkEvent(e: unknown, nowSeconds: number): Invalid | null {
  if (!isObj(e)) return invalid(2804001, 'Invalid event', 'Each event must be an object.');
  if (typeof e.event_name !== 'string' || e.event_name === '') return invalid(2804002, 'Missing event_name', 'The event_name parameter is required.');
  if (typeof e.event_time !== 'number' || !Number.isInteger(e.event_time)) {
    return invalid(2804003, 'Invalid event_time', 'The event_time parameter must be a Unix timestamp in seconds.');
  }
  if (e.event_time < nowSeconds - MAX_AGE_SECONDS) {
    return invalid(
      2804004,
      'Event timestamp too old',
      'The timestamp for this event is too far in the past. Events need to be sent from your server within 7 days of when they occurred.',
    );
  }
  if (e.event_time > nowSeconds + MAX_FUTURE_SECONDS) return invalid(2804005, 'Event timestamp in the future', 'The event_time cannot be in the future.');
  if (e.event_id !== undefined && (typeof e.event_id !== 'string' || e.event_id === '')) {
    return invalid(2804006, 'Invalid event_id', 'The event_id parameter must be a non-empty string.');
  }
  if (typeof e.action_source !== 'string' || !(ACTION_SOURCES as readonly string[]).includes(e.action_source)) {
    return invalid(2804007, 'Invalid action_source', `The action_source parameter must be one of ${ACTION_SOURCES.join(', ')}.`);
  }
  if (!isObj(e.user_data)) return invalid(2804008, 'Missing user_data', 'The user_data parameter is required.');
  const u = e.user_data;
  if (e.action_source === 'website') {
    if (typeof e.event_source_url !== 'string' || !/^https?:\/\//.test(e.event_source_url)) {
      return invalid(2804009, 'Missing event_source_url', 'Website events require event_source_url.');
    }
    if (typeof u.client_user_agent !== 'string' || u.client_user_agent === '') {
      return invalid(2804010, 'Missing client_user_agent', 'Website events require user_data.client_user_agent.');
    }
  }
  for (const k of HASHED_KEYS) {
    if (u[k] === undefined) continue;
    const values = Array.isArray(u[k]) ? (u[k] as unknown[]) : [u[k]];
    if (!values.every((v) => typeof v === 'string' && SHA256.test(v))) {
      return invalid(2804011, 'Unhashed customer information', `user_data.${k} must be hashed with SHA-256 (lower-case hex).`);
    }
  }
  if (u.fbc !== undefined && (typeof u.fbc !== 'string' || !FBC.test(u.fbc))) {
    return invalid(2804012, 'Invalid fbc', 'user_data.fbc must be fb.<subdomain index>.<creation time>.<fbclid>.');
  }
  if (u.fbp !== undefined && (typeof u.fbp !== 'string' || !FBP.test(u.fbp))) {
    return invalid(2804013, 'Invalid fbp', 'user_data.fbp must be fb.<subdomain index>.<creation time>.<random number>.');
  }
  const present = CUSTOMER_KEYS.filter((k) => u[k] !== undefined && !(Array.isArray(u[k]) && (u[k] as unknown[]).length === 0));
  if (present.length === 0) {
    return invalid(2804014, 'Not enough customer information', `user_data needs at least one of ${CUSTOMER_KEYS.join(', ')}.`);
  }
  if (e.data_processing_options !== undefined) {
    const dpo = e.data_processing_options;
    if (!Array.isArray(dpo) || !dpo.every((o) => o === 'LDU')) {
      return invalid(2804015, 'Invalid data_processing_options', "data_processing_options must be [] or ['LDU'].");
    }
    for (const k of ['data_processing_options_country', 'data_processing_options_state'] as const) {
      if (e[k] !== undefined && (typeof e[k] !== 'number' || !Number.isInteger(e[k]))) {
        return invalid(2804016, `Invalid ${k}`, `${k} must be an integer.`);
      }
    }
  }
  if (e.custom_data !== undefined) {
    if (!isObj(e.custom_data)) return invalid(2804017, 'Invalid custom_data', 'custom_data must be an object.');
    const c = e.custom_data;
    if (c.value !== undefined && (typeof c.value !== 'number' || !Number.isFinite(c.value))) {
      return invalid(2804018, 'Invalid value', 'custom_data.value must be a number.');
    }
    if (c.currency !== undefined && (typeof c.currency !== 'string' || !/^[A-Za-z]{3}$/.test(c.currency))) {
      return invalid(2804019, 'Invalid currency', 'custom_data.currency must be an ISO 4217 code.');
    }
  }
  if (e.event_name === 'Purchase') {
    const c = isObj(e.custom_data) ? e.custom_data : {};
    if (c.value === undefined || c.currency === undefined) {
      return invalid(2804020, 'Missing purchase value', 'Purchase events require custom_data.value and custom_data.currency.');
    }
  }
  return null;
}

/** Null when the body is acceptable; else the one problem Meta would name. */
export function validateEventsBody(body: unknown, nowSeconds: number): Invalid | null {
  if (!isObj(body)) return invalid(2804000, 'Invalid request', 'The request body must be a JSON object.');
  if (!Array.isArray(body.data) || body.data.length === 0) return invalid(2804021, 'Missing data', 'The data parameter must be a non-empty array of events.');
  if (body.data.length > MAX_EVENTS) {
    return invalid(2804022, 'Too many events', `The data parameter may carry at most ${MAX_EVENTS} events (got ${body.data.length}).`);
  }
  if (body.test_event_code !== undefined && typeof body.test_event_code !== 'string') {
    return invalid(2804023, 'Invalid test_event_code', 'test_event_code must be a string.');
  }
  for (const e of body.data) {
    const problem = checkEvent(e, nowSeconds);
    if (problem) return problem;
  }
  return null;
}
