/**
 * An in-memory embedded store (PGlite) and its log for one test file: opened before the file's tests, closed after.
 * Read `db` and `log` inside tests and hooks (they are set once the file's `beforeAll` ran).
 */
import { afterAll, beforeAll } from 'vitest';
import type { Db } from '../../services/shared/db/db.js';
import { openDatabase } from '../../services/shared/db/open.js';
import { EmbeddedLog } from '../../services/stream/embedded/log.js';

export interface InMemoryLog {
  readonly db: Db;
  readonly log: EmbeddedLog;
}

export function inMemoryLog(): InMemoryLog {
  const held: { db?: Db; log?: EmbeddedLog } = {};
  beforeAll(async () => {
    held.db = await openDatabase({ inMemory: true });
    held.log = new EmbeddedLog(held.db);
  });
  afterAll(async () => {
    await held.log?.close();
    await held.db?.close();
  });
  return {
    get db() {
      return held.db!;
    },
    get log() {
      return held.log!;
    },
  };
}
