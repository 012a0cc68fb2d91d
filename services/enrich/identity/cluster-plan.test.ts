import { describe, expect, it } from 'vitest';
import { clusterIdFor, planCluster } from './cluster-plan.js';
import { nodeKey, type GraphKind, type GraphNode } from './kinds.js';

const n = (kind: GraphKind, value: string): GraphNode => ({ kind, value });
const id = (node: GraphNode) => clusterIdFor('ws', 'live', node);
const plan = (nodes: GraphNode[], existing: Array<[GraphNode, string]> = [], counts: Record<string, number> = {}, cap = 4) =>
  planCluster({
    workspaceId: 'ws',
    keyMode: 'live',
    nodes,
    existing: new Map(existing.map(([node, c]) => [nodeKey(node), c])),
    stableCounts: new Map(Object.entries(counts)),
    cap,
  });

const user = n('user_id', 'u1');
const email = n('email_sha256', 'e'.repeat(64));
const client = n('client_id', 'c1');
const session = n('session_id', 's1');
const org = n('organization', 'acme');

describe('planCluster', () => {
  it('founds a cluster named after the best identifier when none is known', () => {
    const p = plan([user, client, session]);
    expect(p).toMatchObject({ merge: null, refused: false, resolved: id(user) });
    expect([...p.clusterOf.values()]).toEqual([id(user), id(user), id(user)]);
  });

  it('adds new identifiers to the one known cluster', () => {
    const p = plan([user, client], [[client, 'cA']], { cA: 2 });
    expect(p).toMatchObject({ merge: null, refused: false, resolved: 'cA' });
    expect(p.clusterOf.get(nodeKey(user))).toBe('cA');
  });

  it.each([
    { name: 'into the larger cluster', counts: { cA: 1, cB: 2 }, into: 'cB', from: ['cA'] },
    { name: 'on a tie, into the smaller id (deterministic)', counts: { cA: 1, cB: 1 }, into: 'cA', from: ['cB'] },
  ])('merges two known clusters $name', ({ counts, into, from }) => {
    const p = plan([user, client], [[user, 'cA'], [client, 'cB']], counts);
    expect(p).toMatchObject({ merge: { into, from }, refused: false, resolved: into });
    expect(p.clusterOf.get(nodeKey(user))).toBe(into);
    expect(p.clusterOf.get(nodeKey(client))).toBe(into);
  });

  it('merges exactly up to the cap', () => {
    expect(plan([user, client, email], [[user, 'cA'], [client, 'cB']], { cA: 2, cB: 1 }, 4).refused).toBe(false);
  });

  it('refuses a merge past the cap: clusters stay apart, the event resolves to its best identifier\'s cluster', () => {
    const p = plan([user, client], [[user, 'cA'], [client, 'cGiant']], { cA: 1, cGiant: 4 }, 4);
    expect(p).toMatchObject({ merge: null, refused: true, resolved: 'cA' });
    expect(p.clusterOf.get(nodeKey(client))).toBe('cGiant');
  });

  it('on refusal, new identifiers join the best cluster when it has room', () => {
    const p = plan([user, email, client], [[user, 'cA'], [client, 'cGiant']], { cA: 1, cGiant: 4 }, 4);
    expect(p.refused).toBe(true);
    expect(p.clusterOf.get(nodeKey(email))).toBe('cA');
  });

  it('a new stable identifier never joins a full cluster: it founds its own (refused)', () => {
    const p = plan([email, client], [[client, 'cGiant']], { cGiant: 4 }, 4);
    expect(p).toMatchObject({ refused: true, resolved: id(email) });
    expect(p.clusterOf.get(nodeKey(client))).toBe('cGiant');
  });

  it('sessions and click ids do not count: they join a full cluster without a refusal', () => {
    const click = n('ttclid', 'click-1');
    const p = plan([client, session, click], [[client, 'cFull']], { cFull: 4 }, 4);
    expect(p).toMatchObject({ refused: false, resolved: 'cFull' });
    expect(p.clusterOf.get(nodeKey(session))).toBe('cFull');
  });

  it('an organisation never merges person clusters: it stays a singleton linked by edges', () => {
    const p = plan([user, org], [[org, id(org)]], {});
    expect(p.resolved).toBe(id(user));
    expect(p.clusterOf.get(nodeKey(org))).toBe(id(org));
    expect(plan([org]).resolved).toBeNull();
  });

  it('nothing to link: no resolution', () => {
    expect(plan([])).toMatchObject({ merge: null, refused: false, resolved: null });
  });
});
