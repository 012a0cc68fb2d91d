/**
 * DATA_DIR holds the embedded store (console users, key hashes, sessions, events) and possibly the credentials key:
 * nothing under it may be readable or writable by other users. PGlite's file system layer creates its files 0666
 * whatever the umask, so the directory is kept 0700 (which alone closes every path below it) and every entry is
 * stripped of its group and other bits at start-up and once the store is open.
 */
import { chmodSync, lstatSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/** The bits that give anyone but the owner access. */
const SHARED_BITS = 0o077;

export class UnsafeDataDirError extends Error {}

/**
 * Creates `dir` 0700 when missing and removes group and other access from it and everything below it (symlinks are
 * not followed). Returns how many entries were repaired; throws UnsafeDataDirError naming the first entry that stays
 * accessible to others (owned by another user, say), so the service refuses to start on a store it cannot protect.
 */
export function keepPrivate(dir: string): { repaired: number } {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  let repaired = 0;
  const visit = (path: string): void => {
    const st = lstatSync(path);
    if (st.isSymbolicLink()) return;
    if ((st.mode & SHARED_BITS) !== 0) {
      try {
        chmodSync(path, st.mode & 0o7700 & ~SHARED_BITS);
      } catch (err) {
        throw new UnsafeDataDirError(
          `DATA_DIR: ${path} is accessible to other users (mode ${(st.mode & 0o777).toString(8)}) and cannot be made private: ${(err as Error).message}`,
        );
      }
      repaired++;
    }
    if (st.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name));
  };
  visit(dir);
  return { repaired };
}
