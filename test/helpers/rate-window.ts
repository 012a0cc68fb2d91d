/**
 * Exact rate-limit counts without trusting the machine's speed. The workspace limiter (rate-limiter-flexible, in
 * memory and on Redis alike) counts in fixed windows that open at a key's first consume and last `windowMs` (the
 * rate window is 1 s; the burst window is ceil(burst / rps) s, never shorter). A burst whose first request started
 * and whose last answer arrived less than `windowMs` apart, on the wall clock the limiter reads, had every consume
 * inside the first window, so exact counts hold for it. A run that took longer (a loaded 2-core CI machine) proves
 * nothing either way: it is thrown away and run again on a fresh workspace (`prepare`), and after `attempts` such runs
 * the test fails and names their durations. The counts are asserted by the caller, on the run that fitted.
 */
export async function inOneWindow<P, T>(
  prepare: () => Promise<P>,
  burst: (prepared: P) => Promise<T>,
  { windowMs = 1_000, attempts = 5 }: { windowMs?: number; attempts?: number } = {},
): Promise<T> {
  const took: number[] = [];
  for (let i = 0; i < attempts; i++) {
    const prepared = await prepare();
    const start = Date.now();
    const result = await burst(prepared);
    const elapsed = Date.now() - start;
    if (elapsed < windowMs) return result;
    took.push(elapsed);
  }
  throw new Error(`no burst fitted one ${windowMs} ms rate-limit window in ${attempts} tries (took ${took.join(', ')} ms)`);
}
