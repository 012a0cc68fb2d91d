/**
 * Enrich ahead of its transaction (the embedded runtime, contract.ts `ahead`): its reads outside the transaction are
 * checked again in it where a write relies on them. The redaction list is the one that matters: an erasure that
 * commits between the batch's processing and its transaction must not let the erased person's event re-link them.
 */
import { describe, expect, it } from 'vitest';
import { StaleBatchError, type InputRecord } from '../stream/contract.js';
import { tableStoreTransaction } from '../stream/embedded/table-store.js';
import { processAhead } from '../stream/error-policy.js';
import { sha256 } from '../../test/helpers/factories.js';
import { inMemoryLog } from '../../test/helpers/embedded-log.js';
import { webEnvelope } from '../../test/helpers/envelopes.js';
import { label, processAll } from '../../test/helpers/stage-harness.js';
import { seedWorkspace } from '../../test/helpers/workspaces.js';
import { saltedHash, workspaceSalt } from './identity/erasure-filter.js';
import { createEnrichProcessor, IDENTITY_STORE, type EnrichEntry } from './processor.js';

const mem = inMemoryLog();

const enrich = createEnrichProcessor({ settingsTtlMs: 0 });
let offset = 0;
const recordOf = (value: unknown): InputRecord<unknown> => ({ topic: enrich.input, partition: 0, offset: String(++offset), key: 'k', value, timestamp: Date.now() });
const ahead = (values: unknown[]) => processAhead(enrich, values.map(recordOf), { sql: mem.db, store: tableStoreTransaction<EnrichEntry>(mem.db, IDENTITY_STORE), now: Date.now });
/** The batch's writes in a transaction of their own, as the runner runs them before its outputs. */
const commitWrites = (writes: Awaited<ReturnType<typeof ahead>>['writes']) =>
  mem.db.transaction(async (tx) => {
    for (const w of writes) await w(tx);
  });

/** Erases jane@example.com's hashed email in the workspace, as the erasure job records it. */
async function eraseJane(ws: string): Promise<void> {
  const salt = await workspaceSalt(mem.db, ws);
  await mem.db.query(`INSERT INTO erased_identifiers (workspace_id, id_hash, erased_at, erasure_id) VALUES ($1, $2, now() + interval '1 minute', $3)`, [
    ws,
    saltedHash(salt, { cls: 'email', value: sha256('jane@example.com') }),
    `era-${ws}`,
  ]);
}

describe('enrich ahead of its transaction', () => {
  it('an erasure committed between the processing and the transaction makes the batch stale; again in its transaction, the event drops', async () => {
    const ws = await seedWorkspace(mem.db);
    const event = webEnvelope({}, { workspaceId: ws });
    const done = await ahead([event]);
    expect(done.outcomes.map(label)).toEqual(['ok']);
    await eraseJane(ws);
    await expect(commitWrites(done.writes)).rejects.toBeInstanceOf(StaleBatchError);
    expect((await processAll(mem.db, enrich, [event])).map(label)).toEqual(['drop:erased']);
  });

  it('with no erasure in between, its writes commit: the Activity counts of its drops among them', async () => {
    const ws = await seedWorkspace(mem.db, { setup: { test_event_code: null } });
    const done = await ahead([webEnvelope({}, { workspaceId: ws, keyMode: 'test' })]);
    expect(done.outcomes.map(label)).toEqual(['drop:test_mode_without_test_event_code']);
    const counted = () => mem.db.query<{ n: number }>(`SELECT n::int AS n FROM activity_counts WHERE workspace_id = $1 AND kind = 'dropped'`, [ws]);
    expect((await counted()).rows).toEqual([]); // written by the batch's transaction, not before it
    await commitWrites(done.writes);
    expect((await counted()).rows).toEqual([{ n: 1 }]);
  });
});
