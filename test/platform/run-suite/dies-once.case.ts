// Its worker dies under it (SIGKILL) the first time it runs in a directory, as a vitest worker sometimes does.
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';

it('passes the second time', () => {
  const marker = join(process.env.RUN_SUITE_CASE_DIR!, 'died');
  if (!existsSync(marker)) {
    writeFileSync(marker, '');
    process.kill(process.pid, 'SIGKILL');
  }
  expect(existsSync(marker)).toBe(true);
});
