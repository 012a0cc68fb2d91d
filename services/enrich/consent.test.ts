/**
 * The consent matrix: each of the four flags × GRANTED / DENIED / UNSPECIFIED (endpoint A) and true / false
 * (endpoint B), the others GRANTED, through the whole enrich processor: is it forwarded, with which personal data,
 * click id and consent fields, and what did the identity graph keep from it. docs/consent.md is the prose.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConversionReady } from '../domain/conversion.js';
import type { Db } from '../shared/db/db.js';
import { openDatabase } from '../shared/db/open.js';
import { CONSENT_PURPOSES, type ConsentPurpose, type ConsentValue } from '../domain/envelope.js';
import { sgtmEvent } from '../../test/helpers/factories.js';
import { fromB, webEnvelope } from '../../test/helpers/envelopes.js';
import { label, processAll } from '../../test/helpers/stage-harness.js';
import { seedWorkspace } from '../../test/helpers/workspaces.js';
import { consentDecision } from './consent.js';
import { createEnrichProcessor } from './processor.js';

let db: Db;
beforeAll(async () => {
  db = await openDatabase({ inMemory: true });
});
afterAll(async () => db?.close());

const enrich = createEnrichProcessor({ settingsTtlMs: 0 });

interface Expected {
  forwarded: boolean;
  /** user.email / phone / external_id in the record. */
  personalData?: boolean;
  clickId?: boolean;
  limitedDataUse?: boolean;
  /** Graph node kinds kept from the event. */
  graph: 'all' | 'pseudonymous' | 'none';
}

const ALL = { forwarded: true, personalData: true, clickId: true, limitedDataUse: false, graph: 'all' } as const;
const NO_AD_STORAGE = { forwarded: false, graph: 'none' } as const;
const NO_AD_USER_DATA = { forwarded: true, personalData: false, clickId: true, limitedDataUse: true, graph: 'pseudonymous' } as const;

const MATRIX: Record<ConsentPurpose, Record<ConsentValue, Expected>> = {
  analytics_storage: { GRANTED: ALL, DENIED: ALL, UNSPECIFIED: ALL },
  ad_storage: { GRANTED: ALL, DENIED: NO_AD_STORAGE, UNSPECIFIED: NO_AD_STORAGE },
  ad_user_data: { GRANTED: ALL, DENIED: NO_AD_USER_DATA, UNSPECIFIED: NO_AD_USER_DATA },
  ad_personalization: { GRANTED: ALL, DENIED: ALL, UNSPECIFIED: ALL },
};

const PSEUDONYMOUS = ['client_id', 'ttclid'];
const PERSONAL = ['email_sha256', 'phone_e164_sha256', 'phone_numeric_sha256', 'user_id'];

async function check(ws: string, envelope: unknown, expected: Expected, consent: Record<ConsentPurpose, ConsentValue>) {
  const [outcome] = await processAll(db, enrich, [envelope]);
  const kinds = (await db.query<{ kind: string }>('SELECT DISTINCT kind FROM identity_nodes WHERE workspace_id = $1', [ws])).rows.map((r) => r.kind);
  const kept = expected.graph === 'all' ? [...PSEUDONYMOUS, ...PERSONAL] : expected.graph === 'pseudonymous' ? PSEUDONYMOUS : [];
  expect(new Set(kinds)).toEqual(new Set(kept));
  if (!expected.forwarded) {
    expect(label(outcome!)).toBe('drop:no_ad_storage_consent');
    return;
  }
  expect(label(outcome!)).toBe('ok');
  const { record } = (outcome as Extract<typeof outcome, { type: 'ok' }>).outputs[0]!.value as ConversionReady;
  expect(record.limited_data_use).toBe(expected.limitedDataUse);
  expect(record.consent).toEqual({ ad_user_data: consent.ad_user_data, ad_personalization: consent.ad_personalization });
  expect(Boolean(record.user?.email && record.user.phone && record.user.external_id)).toBe(expected.personalData);
  if (!expected.personalData) expect(record.user?.email ?? record.user?.phone ?? record.user?.external_id).toBeUndefined();
  expect(Boolean(record.user?.ttclid)).toBe(expected.clickId);
}

const cases = CONSENT_PURPOSES.flatMap((flag) =>
  (['GRANTED', 'DENIED', 'UNSPECIFIED'] as const).map((value) => ({ flag, value, expected: MATRIX[flag][value] })),
);

describe('consent matrix, endpoint A (GRANTED / DENIED / UNSPECIFIED)', () => {
  it.each(cases)('$flag = $value', async ({ flag, value, expected }) => {
    const ws = await seedWorkspace(db);
    const consent = { analytics_storage: 'GRANTED', ad_storage: 'GRANTED', ad_user_data: 'GRANTED', ad_personalization: 'GRANTED', [flag]: value } as Record<ConsentPurpose, ConsentValue>;
    await check(ws, webEnvelope({ event_metadata: { consent } }, { workspaceId: ws }), expected, consent);
  });
});

describe('consent matrix, endpoint B (booleans: true is GRANTED, false is DENIED)', () => {
  const bCases = CONSENT_PURPOSES.flatMap((flag) => [true, false].map((value) => ({ flag, value, expected: MATRIX[flag][value ? 'GRANTED' : 'DENIED'] })));
  it.each(bCases)('$flag = $value', async ({ flag, value, expected }) => {
    const ws = await seedWorkspace(db);
    const bools = { analytics_storage: true, ad_storage: true, ad_user_data: true, ad_personalization: true, [flag]: value };
    const [e] = fromB(
      [sgtmEvent({
        event_payload: { page_location: 'https://shop.example/thanks?ttclid=B-CLICK', session_id: 'b-session', user_agent: 'UA' },
        event_metadata: { consent: bools, identifiers: [
          { alias_type: 'client', anonymous_client_id: 'anon-1' },
          { alias_type: 'user', user_id: 'user-42' },
          { alias_type: 'email', hashed_email: 'a'.repeat(64) },
        ] },
      })],
      `b-${flag}-${value}`,
      { workspaceId: ws },
    );
    const consent = Object.fromEntries(Object.entries(bools).map(([k, v]) => [k, v ? 'GRANTED' : 'DENIED'])) as Record<ConsentPurpose, ConsentValue>;
    // B carries no phone: personal data here means email and external id.
    const [outcome] = await processAll(db, enrich, [e]);
    const kinds = (await db.query<{ kind: string }>('SELECT DISTINCT kind FROM identity_nodes WHERE workspace_id = $1', [ws])).rows.map((r) => r.kind);
    const kept = expected.graph === 'all' ? [...PSEUDONYMOUS, 'email_sha256', 'user_id'] : expected.graph === 'pseudonymous' ? PSEUDONYMOUS : [];
    expect(new Set(kinds)).toEqual(new Set(kept));
    if (!expected.forwarded) return expect(label(outcome!)).toBe('drop:no_ad_storage_consent');
    const { record } = (outcome as Extract<typeof outcome, { type: 'ok' }>).outputs[0]!.value as ConversionReady;
    expect(record.limited_data_use).toBe(expected.limitedDataUse);
    expect(record.consent).toEqual({ ad_user_data: consent.ad_user_data, ad_personalization: consent.ad_personalization });
    expect(Boolean(record.user?.email && record.user.external_id)).toBe(expected.personalData);
    expect(record.user?.ttclid).toBe('B-CLICK');
  });
});

describe('consent decision (pure): only GRANTED grants', () => {
  const base = { analytics_storage: 'GRANTED', ad_storage: 'GRANTED', ad_user_data: 'GRANTED', ad_personalization: 'GRANTED' } as const;
  it.each([
    { over: {}, expected: { graph: true, clickIds: true, personalData: true, forward: true, sendPersonalData: true, limitedDataUse: false } },
    { over: { ad_storage: 'UNSPECIFIED' }, expected: { graph: false, clickIds: false, personalData: false, forward: false, sendPersonalData: true, limitedDataUse: false } },
    { over: { ad_user_data: 'UNSPECIFIED' }, expected: { graph: true, clickIds: true, personalData: false, forward: true, sendPersonalData: false, limitedDataUse: true } },
    { over: { ad_storage: 'DENIED', ad_user_data: 'DENIED' }, expected: { graph: false, clickIds: false, personalData: false, forward: false, sendPersonalData: false, limitedDataUse: true } },
    { over: { analytics_storage: 'DENIED', ad_personalization: 'DENIED' }, expected: { graph: true, clickIds: true, personalData: true, forward: true, sendPersonalData: true, limitedDataUse: false } },
  ])('$over', ({ over, expected }) => {
    expect(consentDecision({ ...base, ...over } as never)).toEqual(expected);
  });
});
