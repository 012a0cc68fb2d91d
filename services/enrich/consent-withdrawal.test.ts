/**
 * Consent withdrawal (docs/consent.md, "Withdrawal"): a person's later event that withholds ad_storage or
 * ad_user_data makes the graph stop offering the identifiers (and click ids, session data) that earlier events of
 * theirs put there. The matrix: the later event's ad_storage × ad_user_data, each GRANTED / DENIED / UNSPECIFIED,
 * then a consenting conversion of the same person that carries only their client id, through the whole processor.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConversionReady } from '../domain/conversion.js';
import type { Db } from '../shared/db/db.js';
import { openDatabase } from '../shared/db/open.js';
import { sha256 } from '../../test/helpers/factories.js';
import { T0, webEnvelope } from '../../test/helpers/envelopes.js';
import { label, outputValue, processAll } from '../../test/helpers/stage-harness.js';
import { seedWorkspace } from '../../test/helpers/workspaces.js';
import { createEnrichProcessor } from './processor.js';

let db: Db;
beforeAll(async () => {
  db = await openDatabase({ inMemory: true });
});
afterAll(async () => db?.close());

const enrich = createEnrichProcessor({ settingsTtlMs: 0 });
const MIN = 60_000;
const EMAIL = sha256('jane@example.com');
type Value = 'GRANTED' | 'DENIED' | 'UNSPECIFIED';
const VALUES: readonly Value[] = ['GRANTED', 'DENIED', 'UNSPECIFIED'];
/** The factories merge overrides into a full event: undefined removes its default identifiers. */
const NO_IDS = { user: undefined, email: undefined, phone: undefined };
const granted = { analytics_storage: 'GRANTED', ad_storage: 'GRANTED', ad_user_data: 'GRANTED', ad_personalization: 'GRANTED' } as const;

/** A page view of the same device (client id only) with the given consent. */
const pageView = (ws: string, at: number, consent: Record<string, Value>) =>
  webEnvelope(
    {
      event_name: 'page_view',
      event_data: { client_id: 'cid-w', session_id: 'sid-later', page_location: 'https://shop.example/cart' },
      event_metadata: { identifiers: NO_IDS, consent: { ...granted, ...consent } },
    },
    { workspaceId: ws, receivedAt: at },
  );

/** A consenting conversion of the same device that carries only its client id: the rest is the graph's. */
const conversion = (ws: string, at: number) =>
  webEnvelope(
    { event_data: { client_id: 'cid-w', session_id: `sid-${at}`, page_location: 'https://shop.example/checkout' }, event_metadata: { identifiers: NO_IDS } },
    { workspaceId: ws, receivedAt: at },
  );

async function convert(ws: string, at: number): Promise<ConversionReady> {
  const [o] = await processAll(db, enrich, [conversion(ws, at)]);
  expect(label(o!)).toBe('ok');
  return outputValue<ConversionReady>(o!);
}

const cases = VALUES.flatMap((ad_storage) => VALUES.map((ad_user_data) => ({ ad_storage, ad_user_data })));

describe('a later event withholding consent: what the graph still offers to a consenting conversion', () => {
  it.each(cases)('later event ad_storage=$ad_storage ad_user_data=$ad_user_data', async ({ ad_storage, ad_user_data }) => {
    const ws = await seedWorkspace(db);
    // Earlier: a consenting web visit linked the device, the user id, the email, the phone and a click id.
    const first = webEnvelope(
      { event_name: 'page_view', event_data: { client_id: 'cid-w', session_id: 'sid-w', page_location: 'https://shop.example/?ttclid=E.C.P.w1' } },
      { workspaceId: ws, receivedAt: T0 },
    );
    await processAll(db, enrich, [first]);
    const before = (await convert(ws, T0 + MIN)).record;
    expect(before.user?.email).toEqual([EMAIL]);
    expect(before.user?.ttclid).toBe('E.C.P.w1');

    await processAll(db, enrich, [pageView(ws, T0 + 2 * MIN, { ad_storage, ad_user_data })]);
    const after = (await convert(ws, T0 + 3 * MIN)).record;

    const storage = ad_storage === 'GRANTED';
    const personal = storage && ad_user_data === 'GRANTED';
    // Personal identifiers: withdrawn by either flag.
    expect(after.user?.email).toEqual(personal ? [EMAIL] : undefined);
    expect(after.user?.phone).toEqual(personal ? [sha256('+4915112345678')] : undefined);
    expect(after.user?.external_id).toEqual(personal ? [sha256('user-42')] : undefined);
    // Click ids and session data: withdrawn by ad_storage only.
    expect(after.user?.ttclid).toBe(storage ? 'E.C.P.w1' : undefined);
    // The conversion's own consent is unchanged: it grants everything.
    expect(after.limited_data_use).toBe(false);
  });
});

describe('after a withdrawal', () => {
  it('an identifier brought again by a consenting event is offered again; the others stay withheld', async () => {
    const ws = await seedWorkspace(db);
    await processAll(db, enrich, [webEnvelope({ event_data: { client_id: 'cid-w' } }, { workspaceId: ws, receivedAt: T0 })]);
    await processAll(db, enrich, [pageView(ws, T0 + MIN, { ad_user_data: 'DENIED' })]);
    expect((await convert(ws, T0 + 2 * MIN)).record.user?.email).toBeUndefined();
    // The person consents again and signs in with their email (no phone this time).
    const again = webEnvelope(
      { event_name: 'sign_in', event_data: { client_id: 'cid-w' }, event_metadata: { identifiers: { ...NO_IDS, email: { sha256_email: EMAIL } } } },
      { workspaceId: ws, receivedAt: T0 + 3 * MIN },
    );
    await processAll(db, enrich, [again]);
    const user = (await convert(ws, T0 + 4 * MIN)).record.user;
    expect(user?.email).toEqual([EMAIL]);
    expect(user?.phone).toBeUndefined();
    expect(user?.external_id).toBeUndefined();
  });

  it('a withdrawal in the same batch applies to the conversions after it, not before', async () => {
    const ws = await seedWorkspace(db);
    await processAll(db, enrich, [webEnvelope({ event_data: { client_id: 'cid-w' } }, { workspaceId: ws, receivedAt: T0 })]);
    const outcomes = await processAll(db, enrich, [conversion(ws, T0 + MIN), pageView(ws, T0 + 2 * MIN, { ad_storage: 'DENIED' }), conversion(ws, T0 + 3 * MIN)]);
    expect(outputValue<ConversionReady>(outcomes[0]!).record.user?.email).toEqual([EMAIL]);
    expect(label(outcomes[1]!)).toBe('drop:not_selected');
    expect(outputValue<ConversionReady>(outcomes[2]!).record.user?.email).toBeUndefined();
  });

  it('a withholding event that carries only identifiers the graph never saw changes nothing', async () => {
    const ws = await seedWorkspace(db);
    await processAll(db, enrich, [webEnvelope({ event_data: { client_id: 'cid-w' } }, { workspaceId: ws, receivedAt: T0 })]);
    const stranger = webEnvelope(
      { event_name: 'page_view', event_data: { client_id: 'cid-other', session_id: 'sid-other', page_location: 'https://shop.example/?ttclid=E.C.P.other' }, event_metadata: { identifiers: NO_IDS, consent: { ...granted, ad_storage: 'DENIED' } } },
      { workspaceId: ws, receivedAt: T0 + MIN },
    );
    await processAll(db, enrich, [stranger]);
    expect((await convert(ws, T0 + 2 * MIN)).record.user?.email).toEqual([EMAIL]);
    const stored = await db.query('SELECT 1 FROM identity_nodes WHERE workspace_id = $1 AND value = $2', [ws, 'cid-other']);
    expect(stored.rows).toHaveLength(0);
  });
});
