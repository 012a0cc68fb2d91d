/**
 * Realistic request bodies for endpoint A: web and server events with hashed identifiers, as a site's tag and a
 * shop's backend would send them. Deterministic for a seed, so every run (and the baseline) posts the same bytes.
 */
import { createHash } from 'node:crypto';

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

/** A small, fast PRNG (mulberry32): deterministic bodies without the cost of crypto randomness. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const USER_AGENTS = [
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36',
  'Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1',
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15',
  'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36',
  'Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0',
];
const PAGES = ['/', '/shoes', '/shoes/trail-runner-2', '/cart', '/checkout', '/checkout/thanks', '/account/sign-up', '/search'];
const WEB_EVENTS = ['page_view', 'page_view', 'page_view', 'view_item', 'add_to_cart', 'begin_checkout', 'purchase', 'sign_up'];
const SERVER_EVENTS = ['purchase', 'purchase', 'refund', 'sign_up', 'subscription_renewed'];
const REFERRERS = ['https://www.google.com/', 'https://www.tiktok.com/', 'https://shop.example/', 'https://news.example.org/article/42'];

const hex = (r: () => number, n: number): string => {
  let s = '';
  while (s.length < n) s += Math.floor(r() * 0x100000000).toString(16).padStart(8, '0');
  return s.slice(0, n);
};
const pick = <T>(r: () => number, list: readonly T[]): T => list[Math.floor(r() * list.length)]!;
const uuidLike = (r: () => number): string => {
  const h = hex(r, 32);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
};

/** A pool of hashed identities (hashing is not what we measure; a site sees the same people again and again). */
function identities(r: () => number, n: number): Person[] {
  return Array.from({ length: n }, (_, i) => {
    const email = `customer${i}.${hex(r, 6)}@mail.example`;
    const phone = `+49151${String(Math.floor(r() * 1e8)).padStart(8, '0')}`;
    return {
      user: `cust_${hex(r, 12)}`,
      client_id: `${Math.floor(r() * 2e9)}.${1_730_000_000 + Math.floor(r() * 1e7)}`,
      email: sha256(email),
      email_canonical: r() < 0.5 ? sha256(email.replace(/\./g, '')) : undefined,
      phone: r() < 0.4 ? { sha256_e164: sha256(phone), sha256_e164_numeric: sha256(phone.slice(1)) } : undefined,
    };
  });
}

export interface Person {
  readonly user: string;
  readonly client_id: string;
  readonly email: string;
  readonly email_canonical: string | undefined;
  readonly phone: { readonly sha256_e164: string; readonly sha256_e164_numeric: string } | undefined;
}

/** The people that makeBodies(…, { people: n }, seed) draws its events from, in the same order. */
export function bodyPeople(seed: number, n: number): Person[] {
  return identities(rng(seed), n);
}

/** Default size of the pool of people: long histories (each person has many events). */
export const DEFAULT_PEOPLE = 500;

/**
 * Repeated idempotency keys for the drain benchmark: about `share` of the events (a hash of request and index
 * decides which, from the second request on) reuse the key of the same index in the request before.
 */
export function repeatedKey(request: number, index: number, share: number): boolean {
  if (request === 0 || share <= 0) return false;
  let h = Math.imul(request ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(index + 1, 0xc2b2ae35);
  h = Math.imul(h ^ (h >>> 16), 0x7feb352d);
  h ^= h >>> 15;
  return (h >>> 0) / 4294967296 < share;
}

export interface BodyOptions {
  /** Events per request. */
  readonly events: number;
  /** Size of the pool of people the events come from (default DEFAULT_PEOPLE). */
  readonly people?: number;
  /** Only `purchase` conversions with ad consent (the pipeline bench: every event becomes a platform record). */
  readonly conversionsOnly?: boolean;
  /** Idempotency key of event i of request `request`: default `idem-<uuid>`. */
  readonly key?: (request: number, index: number) => string;
}

const GRANTED = { analytics_storage: 'GRANTED', ad_storage: 'GRANTED', ad_user_data: 'GRANTED', ad_personalization: 'GRANTED' };
const MIXED = [
  GRANTED,
  GRANTED,
  GRANTED,
  { analytics_storage: 'GRANTED', ad_storage: 'DENIED', ad_user_data: 'DENIED', ad_personalization: 'DENIED' },
  { analytics_storage: 'GRANTED', ad_storage: 'GRANTED', ad_user_data: 'DENIED', ad_personalization: 'UNSPECIFIED' },
];

/** `count` JSON bodies of `opts.events` events each (about 70% web, 30% server). */
export function makeBodies(count: number, opts: BodyOptions, seed = 42): string[] {
  const r = rng(seed);
  const people = identities(r, opts.people ?? DEFAULT_PEOPLE);
  const out: string[] = [];
  for (let q = 0; q < count; q++) {
    const events: unknown[] = [];
    for (let i = 0; i < opts.events; i++) {
      const p = pick(r, people);
      const key = opts.key ? opts.key(q, i) : `idem-${uuidLike(r)}`;
      const identifiers: Record<string, unknown> = {};
      if (r() < 0.6) identifiers.user = p.user;
      if (r() < 0.7) identifiers.email = p.email_canonical ? { sha256_email: p.email, sha256_canonical: p.email_canonical } : { sha256_email: p.email };
      if (p.phone && r() < 0.7) identifiers.phone = p.phone;
      const consent = opts.conversionsOnly ? GRANTED : pick(r, MIXED);
      if (r() < 0.7) {
        const path = pick(r, PAGES);
        const click = r() < 0.3 ? `&ttclid=E.C.P.${hex(r, 24)}` : '';
        const data: Record<string, unknown> = {
          client_id: p.client_id,
          session_id: String(1_730_000_000 + Math.floor(r() * 1e7)),
          page_location: `https://shop.example${path}?utm_source=tiktok&utm_medium=paid&utm_campaign=winter_sale${click}`,
          user_agent: pick(r, USER_AGENTS),
          page_title: 'Trail Runner 2 – Shop Example',
          screen_resolution: '1920x1080',
          language: 'de-DE',
        };
        if (r() < 0.6) data.page_referrer = pick(r, REFERRERS);
        const name = opts.conversionsOnly ? 'purchase' : pick(r, WEB_EVENTS);
        if (name === 'purchase' || name === 'add_to_cart' || name === 'begin_checkout') {
          data.value = Math.round(r() * 20000) / 100;
          data.currency = 'EUR';
          data.items = [{ item_id: `SKU-${hex(r, 6)}`, item_name: 'Trail Runner 2', price: 89.9, quantity: 1 }];
        }
        events.push({ event_name: name, event_source: 'WEB', event_data: data, event_metadata: { idempotency_key: key, identifiers, consent } });
      } else {
        const name = opts.conversionsOnly ? 'purchase' : pick(r, SERVER_EVENTS);
        events.push({
          event_name: name,
          event_source: 'SERVER',
          event_data: {
            transaction_id: `T-${hex(r, 12)}`,
            value: Math.round(r() * 30000) / 100,
            currency: 'EUR',
            items: [{ item_id: `SKU-${hex(r, 6)}`, price: 89.9, quantity: 1 + Math.floor(r() * 3) }],
            order_source: 'backend',
          },
          event_metadata: { idempotency_key: key, identifiers, consent },
        });
      }
    }
    out.push(JSON.stringify(events));
  }
  return out;
}
