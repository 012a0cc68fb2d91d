/** Waiting for the service's dedupe stage in tests that check what it accepted. */
import type { AdminClient } from '../../../test/helpers/admin-client.js';
import { pipelineStatus } from '../../../test/helpers/pipeline.js';

/** Waits until dedupe has read all of events.raw (what it accepted is then in events.deduped; enrich may lag). */
export async function dedupeDrained(admin: AdminClient, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await pipelineStatus(admin);
    const end = s.topics.find((t) => t.topic === 'events.raw')?.end_offset ?? 0;
    const dedupe = s.consumers.find((c) => c.group === 'dedupe' && c.topic === 'events.raw');
    if (end === 0 || dedupe?.lag === 0) return;
    if (Date.now() > deadline) throw new Error(`dedupe not drained within ${timeoutMs} ms: ${JSON.stringify(s)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
