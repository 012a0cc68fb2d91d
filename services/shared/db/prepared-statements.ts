/**
 * Which statements run as named prepared statements, on both stores (Postgres through pg, shared/db/postgres.ts; PGlite
 * on its thread, shared/db/pglite-worker.ts). This module imports nothing, so the PGlite thread loads it as it is.
 */

/**
 * Names for the statements that take parameters, so that each connection parses and plans a statement once and then
 * only binds and executes it. Postgres spent 300 µs of CPU parsing and planning the forwarder's readiness query at
 * every call, 40 µs executing it prepared; the stages' batch statements are parsed and planned at every chunk the same
 * way (docs/decisions.md). A statement's name follows from its text, the same on every connection of the process, and
 * is never given to another text. At most MAX_NAMED texts get a name: statements whose text is built from varying parts
 * (the delivery log's filters) cannot grow the connections' caches without bound; beyond it they run unnamed as
 * before. Postgres replans a prepared statement by itself when a table it reads changes (DDL), but refuses to when the
 * change alters the statement's result columns (`SELECT *` of a table another replica's migration added a column to):
 * such a text runs unnamed from then on (`forget`).
 */
export class StatementNames {
  static readonly MAX_NAMED = 256;
  /** A text's name, or null once forgotten (it runs unnamed). */
  private readonly names = new Map<string, string | null>();

  of(text: string): string | undefined {
    let name = this.names.get(text);
    if (name === undefined && this.names.size < StatementNames.MAX_NAMED) this.names.set(text, (name = `s${this.names.size}`));
    return name ?? undefined;
  }

  forget(text: string): void {
    if (this.names.has(text)) this.names.set(text, null);
  }
}

/** Postgres's refusal to run a prepared statement whose result columns a DDL changed (SQLSTATE 0A000). */
export function planResultChanged(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | null;
  return e?.code === '0A000' && /cached plan must not change result type/.test(e.message ?? '');
}
