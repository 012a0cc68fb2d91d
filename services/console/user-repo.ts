/**
 * Console users and their workspace roles. Passwords are kept as bcrypt hashes only (bcryptjs: pure JS, so it
 * installs and builds anywhere without a compiler), of the password's SHA-256: bcrypt reads only 72 bytes, and the
 * digest (44 base64 characters) carries every byte of the password into it. Emails are compared lower-cased.
 */
import { createHash } from 'node:crypto';
import bcrypt from 'bcryptjs';
import { audit } from '../domain/audit-log.js';
import type { Db, Sql } from '../shared/db/db.js';
import { newId } from '../shared/ids.js';

export type Role = 'owner' | 'member';
export const ROLES: readonly Role[] = ['owner', 'member'];

/** bcrypt's cost (the common default, 2^10 rounds). */
const COST = 10;
/** bcrypt reads at most 72 bytes: hashes made before pre-hashing hold at most this much of a password. */
const BCRYPT_MAX_BYTES = 72;
/** In characters (code points), as JSON Schema's minLength and maxLength count them. */
export const MIN_PASSWORD_LENGTH = 10;
export const MAX_PASSWORD_LENGTH = 1024;
/** Marks a stored hash as bcrypt of the password's SHA-256; a hash without it is bcrypt of the password itself. */
const PREHASHED = 'sha256+';

const prehash = (password: string): string => createHash('sha256').update(password, 'utf8').digest('base64');

export async function hashPassword(password: string): Promise<string> {
  return PREHASHED + (await bcrypt.hash(prehash(password), COST));
}

/** Whether `password` is the one `stored` was made from; the same bcrypt work whatever the answer. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  if (stored.startsWith(PREHASHED)) return bcrypt.compare(prehash(password), stored.slice(PREHASHED.length));
  // An older hash of the password itself: bcrypt would ignore what follows byte 72, so a longer password cannot match.
  const fits = Buffer.byteLength(password, 'utf8') <= BCRYPT_MAX_BYTES;
  const same = await bcrypt.compare(fits ? password : '', stored);
  return fits && same;
}

export interface ConsoleUser {
  readonly id: string;
  readonly email: string;
}

export interface Membership {
  readonly workspaceId: string;
  readonly workspaceName: string;
  readonly plan: string;
  readonly role: Role;
}

/** A hash to compare against when the email is unknown, so a wrong email costs the same time as a wrong password. */
const DUMMY_HASH = PREHASHED + bcrypt.hashSync(prehash('not-a-real-password'), COST);

export function passwordProblem(password: string): string | undefined {
  const length = [...password].length;
  if (length < MIN_PASSWORD_LENGTH) return `password must be at least ${MIN_PASSWORD_LENGTH} characters`;
  if (length > MAX_PASSWORD_LENGTH) return `password must be at most ${MAX_PASSWORD_LENGTH} characters`;
  return undefined;
}

/** Gives the user the role in the workspace (added, or role changed), audited. */
export async function grantRole(sql: Sql, workspaceId: string, user: ConsoleUser, role: Role, actor: string): Promise<void> {
  await sql.query(
    `INSERT INTO workspace_members (workspace_id, user_id, role) VALUES ($1, $2, $3)
     ON CONFLICT (workspace_id, user_id) DO UPDATE SET role = EXCLUDED.role`,
    [workspaceId, user.id, role],
  );
  await audit(sql, workspaceId, 'member.added', { user_id: user.id, email: user.email, role }, actor);
}

export class UserRepo {
  constructor(private readonly db: Db) {}

  /**
   * Makes `email` a console user of the workspace with `role`. A new email gets a user with this password; an
   * existing user keeps their own password (the one given is not compared, so the call reveals nothing about it
   * and cannot take the account over) and gets the role in this workspace.
   */
  async addMember(
    workspaceId: string,
    input: { email: string; password: string; role: Role },
    actor: string,
  ): Promise<{ id: string; email: string; role: Role; created: boolean }> {
    const email = input.email.trim().toLowerCase();
    const existing = await this.db.query<{ id: string }>('SELECT id FROM console_users WHERE email = $1', [email]);
    let userId = existing.rows[0]?.id;
    let created = false;
    // Hashed either way, so the answer takes as long for an existing user as for a new one.
    const hash = await hashPassword(input.password);
    return this.db.transaction(async (tx) => {
      if (userId === undefined) {
        userId = newId('usr');
        const r = await tx.query<{ id: string }>(
          'INSERT INTO console_users (id, email, password_hash) VALUES ($1, $2, $3) ON CONFLICT (email) DO NOTHING RETURNING id',
          [userId, email, hash],
        );
        if (r.rows.length === 0) throw new Error('console user created concurrently; retry');
        created = true;
      }
      await grantRole(tx, workspaceId, { id: userId!, email }, input.role, actor);
      return { id: userId!, email, role: input.role, created };
    });
  }

  async members(workspaceId: string): Promise<Array<{ id: string; email: string; role: Role; created_at: string }>> {
    const r = await this.db.query<{ id: string; email: string; role: Role; created_at: Date | string }>(
      `SELECT u.id, u.email, m.role, m.created_at FROM workspace_members m JOIN console_users u ON u.id = m.user_id
       WHERE m.workspace_id = $1 ORDER BY m.created_at`,
      [workspaceId],
    );
    return r.rows.map((m) => ({ id: m.id, email: m.email, role: m.role, created_at: new Date(m.created_at).toISOString() }));
  }

  /** The user when email and password match, else undefined (same work either way). */
  async authenticate(email: string, password: string): Promise<ConsoleUser | undefined> {
    const r = await this.db.query<{ id: string; email: string; password_hash: string }>(
      'SELECT id, email, password_hash FROM console_users WHERE email = $1',
      [email.trim().toLowerCase()],
    );
    const row = r.rows[0];
    const ok = await verifyPassword(password, row?.password_hash ?? DUMMY_HASH);
    if (!ok || !row) return undefined;
    // A hash from before pre-hashing is replaced now that the password is at hand.
    if (!row.password_hash.startsWith(PREHASHED)) {
      await this.db.query('UPDATE console_users SET password_hash = $2 WHERE id = $1', [row.id, await hashPassword(password)]);
    }
    return { id: row.id, email: row.email };
  }

  async user(userId: string): Promise<ConsoleUser | undefined> {
    const r = await this.db.query<ConsoleUser>('SELECT id, email FROM console_users WHERE id = $1', [userId]);
    return r.rows[0];
  }

  async memberships(userId: string): Promise<Membership[]> {
    const r = await this.db.query<{ workspace_id: string; name: string; plan: string; role: Role }>(
      `SELECT m.workspace_id, w.name, w.plan, m.role FROM workspace_members m JOIN workspaces w ON w.id = m.workspace_id
       WHERE m.user_id = $1 ORDER BY w.name, w.id`,
      [userId],
    );
    return r.rows.map((m) => ({ workspaceId: m.workspace_id, workspaceName: m.name, plan: m.plan, role: m.role }));
  }

  async membership(userId: string, workspaceId: string): Promise<Membership | undefined> {
    return (await this.memberships(userId)).find((m) => m.workspaceId === workspaceId);
  }
}
