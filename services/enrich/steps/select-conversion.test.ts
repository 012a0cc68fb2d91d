import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../shared/db/db.js';
import { openDatabase } from '../../shared/db/open.js';
import { writeForwardingSetup } from '../../domain/forwarding-setup.js';
import { SETUP } from '../../../test/helpers/workspaces.js';
import type { EnrichItem } from '../item.js';
import { TtlCache } from '../ttl-cache.js';
import { createSelectConversionStep, DEFAULT_CLICK_WINDOW_DAYS, type WorkspaceSelections } from './select-conversion.js';

let db: Db;
beforeAll(async () => {
  db = await openDatabase({ inMemory: true });
});
afterAll(() => db?.close());

let n = 0;
async function workspace(opts: { forwarding?: boolean; destinations?: Array<{ kind: string; setup: Record<string, unknown>; status?: string; connected?: boolean }> }): Promise<string> {
  const ws = `ws_sel${n++}`;
  await db.query('INSERT INTO workspaces (id, name, plan) VALUES ($1, $2, $3)', [ws, 'sel', 'free']);
  if (opts.forwarding) await writeForwardingSetup(db, ws, { ...SETUP, test_event_code: null, events: [{ name: 'purchase', platform_event: 'CompletePayment' }] });
  for (const [i, d] of (opts.destinations ?? []).entries()) {
    await db.query(
      `INSERT INTO destinations (id, workspace_id, kind, name, setup, status, connected_at) VALUES ($1, $2, $3, 'd', $4::jsonb, $5, CASE WHEN $6 THEN now() END)`,
      [`dst_${ws}_${i}`, ws, d.kind, JSON.stringify(d.setup), d.status ?? 'connected', d.connected ?? true],
    );
  }
  return ws;
}

const item = (ws: string, name: string, over: { test?: boolean; forward?: boolean } = {}) =>
  ({ e: { workspace_id: ws, name, key_mode: over.test ? 'test' : 'live' }, consent: { forward: over.forward ?? true } }) as unknown as EnrichItem;
const select = (items: EnrichItem[]) => createSelectConversionStep({ setups: new TtlCache<WorkspaceSelections | null>(0) })(db, items);
const meta = (over: Record<string, unknown> = {}) => ({ kind: 'meta', setup: { pixel_id: '1', pii_mode: 'hashed', events: [{ name: 'purchase', platform_event: 'Purchase' }, { name: 'lead', platform_event: 'Lead' }], ...over } });
const tiktok = (over: Record<string, unknown> = {}) => ({ kind: 'tiktok', setup: { ...SETUP, click_window_days: 28, pii_mode: 'none', events: [{ name: 'lead', platform_event: 'SubmitForm' }], ...over } });

describe('select-conversion', () => {
  it('the forwarding setup decides the events it takes, as before', async () => {
    const ws = await workspace({ forwarding: true, destinations: [meta()] });
    const [s] = await select([item(ws, 'purchase')]);
    expect(s).toMatchObject({ kind: 'convert', platformEvent: 'CompletePayment', setup: { event_source_id: 'PIXEL123', pii_mode: 'hashed', click_window_days: 7 } });
  });

  it('an event only another destination selects: no TikTok event source, that destination\'s rules', async () => {
    const ws = await workspace({ forwarding: true, destinations: [meta({ pii_mode: 'none' })] });
    const [s] = await select([item(ws, 'lead')]);
    expect(s).toMatchObject({ kind: 'convert', platformEvent: 'lead', testEventCode: null, setup: { event_source: '', event_source_id: '', pii_mode: 'none', click_window_days: DEFAULT_CLICK_WINDOW_DAYS } });
  });

  it('without a forwarding setup: hashed when any selecting destination wants it, the widest TikTok click window', async () => {
    const ws = await workspace({ destinations: [meta(), tiktok(), tiktok({ click_window_days: 14 })] });
    const [lead, purchase] = await select([item(ws, 'lead'), item(ws, 'purchase')]);
    expect(lead).toMatchObject({ kind: 'convert', setup: { event_source_id: '', pii_mode: 'hashed', click_window_days: 28 } });
    expect(purchase).toMatchObject({ kind: 'convert', setup: { pii_mode: 'hashed', click_window_days: DEFAULT_CLICK_WINDOW_DAYS } });
  });

  it('test events: only for a selecting destination with a test code', async () => {
    const ws = await workspace({ forwarding: true, destinations: [meta({ test_event_code: 'T1' })] });
    // The forwarding setup has no test code: the test purchase goes to Meta only.
    expect((await select([item(ws, 'purchase', { test: true })]))[0]).toMatchObject({ kind: 'convert', testEventCode: null, setup: { event_source_id: '' } });
    const bare = await workspace({ destinations: [meta()] });
    expect((await select([item(bare, 'purchase', { test: true })]))[0]).toEqual({ kind: 'skip', reason: 'test_mode_without_test_event_code' });
  });

  describe('skips', () => {
    it.each([
      ['no forwarding setup and no destination', {}, 'purchase', {}, 'no_forwarding_setup'],
      ['an event nobody selects', { destinations: [meta()] }, 'sign_up', {}, 'not_selected'],
      ['no ad_storage consent', { destinations: [meta()] }, 'purchase', { forward: false }, 'no_ad_storage_consent'],
      ['only a destination an admin disconnected', { destinations: [{ ...meta(), status: 'disconnected' }] }, 'purchase', {}, 'no_forwarding_setup'],
    ] as const)('%s', async (_name, opts, name, over, reason) => {
      const ws = await workspace(opts as Parameters<typeof workspace>[0]);
      expect((await select([item(ws, name, over)]))[0]).toEqual({ kind: 'skip', reason });
    });
    it('a destination never connected yet still selects (its conversions wait for it)', async () => {
      const ws = await workspace({ destinations: [{ ...meta(), status: 'disconnected', connected: false }] });
      expect((await select([item(ws, 'purchase')]))[0]).toMatchObject({ kind: 'convert' });
    });
  });
});
