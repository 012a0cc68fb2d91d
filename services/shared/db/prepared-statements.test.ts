import { describe, expect, it } from 'vitest';
import { planResultChanged, StatementNames } from './prepared-statements.js';

describe('StatementNames', () => {
  it('names a text the same every time, and different texts differently', () => {
    const names = new StatementNames();
    const a = names.of('SELECT $1::int');
    expect(names.of('SELECT $2::int')).not.toBe(a);
    expect(names.of('SELECT $1::int')).toBe(a);
  });

  it('names at most MAX_NAMED texts; the ones before keep their names', () => {
    const names = new StatementNames();
    const first = names.of('SELECT 0 WHERE $1');
    for (let i = 1; i < StatementNames.MAX_NAMED; i++) expect(names.of(`SELECT ${i} WHERE $1`)).toBeDefined();
    expect(names.of('SELECT -1 WHERE $1')).toBeUndefined();
    expect(names.of('SELECT 0 WHERE $1')).toBe(first);
  });

  it('runs a forgotten text unnamed from then on, and keeps the others', () => {
    const names = new StatementNames();
    const kept = names.of('SELECT $1::int');
    names.of('SELECT * FROM t WHERE a = $1');
    names.forget('SELECT * FROM t WHERE a = $1');
    expect(names.of('SELECT * FROM t WHERE a = $1')).toBeUndefined();
    expect(names.of('SELECT $1::int')).toBe(kept);
  });
});

describe('planResultChanged', () => {
  it("is Postgres's refusal of a stale plan, and nothing else with its code", () => {
    expect(planResultChanged({ code: '0A000', message: 'cached plan must not change result type' })).toBe(true);
    expect(planResultChanged({ code: '0A000', message: 'feature not supported' })).toBe(false);
    expect(planResultChanged({ code: '42P01', message: 'cached plan must not change result type' })).toBe(false);
    expect(planResultChanged(null)).toBe(false);
    expect(planResultChanged(new Error('x'))).toBe(false);
  });
});
