/** Factories for request bodies, with partial overrides. No copy-pasted fixtures in tests. */
import { createHash, randomUUID } from 'node:crypto';

export const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

type Consent = 'GRANTED' | 'DENIED' | 'UNSPECIFIED';
export interface ConsentA {
  analytics_storage: Consent;
  ad_storage: Consent;
  ad_user_data: Consent;
  ad_personalization: Consent;
}
export const allGranted = (): ConsentA => ({
  analytics_storage: 'GRANTED',
  ad_storage: 'GRANTED',
  ad_user_data: 'GRANTED',
  ad_personalization: 'GRANTED',
});

type DeepPartial<T> = { [K in keyof T]?: T[K] extends object ? DeepPartial<T[K]> : T[K] };

function merge<T>(base: T, over: unknown): T {
  if (over === undefined) return base;
  if (over === null || typeof over !== 'object' || Array.isArray(over) || base === null || typeof base !== 'object') {
    return over as T;
  }
  const out: Record<string, unknown> = { ...(base as Record<string, unknown>) };
  for (const [k, v] of Object.entries(over as Record<string, unknown>)) {
    out[k] = v === undefined ? undefined : merge((base as Record<string, unknown>)[k], v);
  }
  return out as T;
}

export interface WebEvent {
  event_name: string;
  event_source: 'WEB';
  event_data: { client_id: string; session_id: string; page_location: string; user_agent: string; page_referrer?: string };
  event_metadata: {
    idempotency_key: string;
    identifiers: Record<string, unknown>;
    consent: ConsentA;
  };
}

/** A valid endpoint-A web event; every call gets a fresh idempotency key. */
export function webEvent(over: DeepPartial<WebEvent> & Record<string, unknown> = {}): WebEvent {
  return merge<WebEvent>(
    {
      event_name: 'purchase',
      event_source: 'WEB',
      event_data: {
        client_id: 'cid-1',
        session_id: 'sid-1',
        page_location: 'https://shop.example/checkout?ttclid=E.C.P.abc123',
        user_agent: 'Mozilla/5.0 (X11; Linux x86_64)',
      },
      event_metadata: {
        idempotency_key: `idem-${randomUUID()}`,
        identifiers: {
          user: 'user-42',
          email: { sha256_email: sha256('jane@example.com') },
          phone: { sha256_e164: sha256('+4915112345678'), sha256_e164_numeric: sha256('4915112345678') },
        },
        consent: allGranted(),
      },
    },
    over,
  );
}

export interface ServerEvent {
  event_name: string;
  event_source: 'SERVER';
  event_data: Record<string, unknown>;
  event_metadata: WebEvent['event_metadata'];
}

export function serverEvent(over: DeepPartial<ServerEvent> & Record<string, unknown> = {}): ServerEvent {
  return merge<ServerEvent>(
    {
      event_name: 'purchase',
      event_source: 'SERVER',
      event_data: { value: 49.9, currency: 'EUR', transaction_id: `T-${randomUUID()}` },
      event_metadata: {
        idempotency_key: `idem-${randomUUID()}`,
        identifiers: { user: 'user-42', email: { sha256_email: sha256('jane@example.com') } },
        consent: allGranted(),
      },
    },
    over,
  );
}

export interface SgtmEvent {
  event_name: string;
  event_payload: Record<string, unknown>;
  event_metadata: {
    consent: { analytics_storage: boolean; ad_storage: boolean; ad_user_data: boolean; ad_personalization: boolean };
    identifiers: Array<Record<string, unknown>>;
  };
}

export function sgtmEvent(over: DeepPartial<SgtmEvent> & Record<string, unknown> = {}): SgtmEvent {
  return merge<SgtmEvent>(
    {
      event_name: 'purchase',
      event_payload: {
        transaction_id: `T-${randomUUID()}`,
        value: 19.99,
        currency: 'USD',
        page_location: 'https://shop.example/thanks',
        user_agent: 'Mozilla/5.0',
      },
      event_metadata: {
        consent: { analytics_storage: true, ad_storage: true, ad_user_data: true, ad_personalization: false },
        identifiers: [
          { alias_type: 'client', anonymous_client_id: 'anon-1' },
          { alias_type: 'user', user_id: 'user-42' },
          { alias_type: 'email', hashed_email: sha256('jane@example.com') },
        ],
      },
    },
    over,
  );
}
