/**
 * The sender's event time (API-Version 2026-12-01) becomes the platform record's event_time and
 * conversion_date_time; without it, the receive time.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConversionReady } from '../../domain/conversion.js';
import type { Db } from '../../shared/db/db.js';
import { openDatabase } from '../../shared/db/open.js';
import { serverEvent } from '../../../test/helpers/factories.js';
import { DAY, T0, fromA } from '../../../test/helpers/envelopes.js';
import { outputValue, processAll } from '../../../test/helpers/stage-harness.js';
import { seedWorkspace } from '../../../test/helpers/workspaces.js';
import { createEnrichProcessor } from '../processor.js';

let db: Db;
beforeAll(async () => {
  db = await openDatabase({ inMemory: true });
});
afterAll(async () => db?.close());

const enrich = createEnrichProcessor({ settingsTtlMs: 0 });

describe('build-conversion: event time', () => {
  it.each([
    { name: 'the event time when the sender gave one', eventTime: T0 - 2 * DAY + 1500, seconds: (T0 - 2 * DAY) / 1000 + 1 },
    { name: 'the receive time without it', eventTime: undefined, seconds: T0 / 1000 },
  ])('event_time and conversion_date_time are $name', async ({ eventTime, seconds }) => {
    const ws = await seedWorkspace(db, { timeZone: 'Asia/Tokyo' });
    const [base] = fromA([serverEvent()], { workspaceId: ws, receivedAt: T0 });
    const envelope = eventTime === undefined ? base! : { ...base!, event_time: eventTime };
    const [o] = await processAll(db, enrich, [envelope]);
    const record = outputValue<ConversionReady>(o!).record;
    expect(record.event_time).toBe(seconds);
    const local = new Date(seconds * 1000 + 9 * 3600_000).toISOString().slice(0, 19).replace('T', ' ');
    expect(record.conversion_date_time).toBe(`${local}+09:00`);
  });
});
