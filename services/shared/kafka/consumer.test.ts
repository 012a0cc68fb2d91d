/** The co-partitioning assignor: partition p of every subscribed topic to the same member, whatever the member count. */
import { describe, expect, it } from 'vitest';
import { coPartitionedAssigner } from './consumer.js';

type Metadata = Parameters<typeof coPartitionedAssigner>[3];

async function assign(memberIds: string[], topics: Record<string, number>) {
  const metadata = { topics: new Map(Object.entries(topics).map(([t, n]) => [t, { partitionsCount: n }])) } as unknown as Metadata;
  const members = new Map(memberIds.map((memberId) => [memberId, { memberId }])) as unknown as Parameters<typeof coPartitionedAssigner>[1];
  const result = coPartitionedAssigner(memberIds[0]!, members, new Set(Object.keys(topics)), metadata);
  return new Map(result.map((r) => [r.memberId, Object.fromEntries([...r.assignments].map(([t, a]) => [t, a.partitions]))]));
}

describe('coPartitionedAssigner', () => {
  it.each([1, 2, 3, 4, 6, 7])('with %i members: input and changelog partitions go together, each exactly once', async (n) => {
    const ids = Array.from({ length: n }, (_, i) => `member-${String.fromCharCode(122 - i)}`);
    const plan = await assign(ids, { 'events.raw': 6, 'events.dedupe-state': 6 });
    expect(plan.size).toBe(n);
    const owners = new Map<number, string>();
    for (const [member, a] of plan) {
      expect(a['events.raw'] ?? []).toEqual(a['events.dedupe-state'] ?? []);
      for (const p of a['events.raw'] ?? []) {
        expect(owners.has(p)).toBe(false);
        owners.set(p, member);
      }
    }
    expect([...owners.keys()].sort()).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('gives every member the same plan regardless of the order members are listed in (the leader computes it)', async () => {
    const a = await assign(['b', 'a', 'c'], { t: 6 });
    const b = await assign(['c', 'b', 'a'], { t: 6 });
    expect(a).toEqual(b);
  });

  it('bad input: a topic without partitions assigns nothing and breaks nothing', async () => {
    const plan = await assign(['a', 'b'], { empty: 0, t: 2 });
    expect([...plan.values()].flatMap((a) => a.empty ?? [])).toEqual([]);
    expect([...plan.values()].flatMap((a) => a.t ?? []).sort()).toEqual([0, 1]);
  });
});
