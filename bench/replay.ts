/**
 * replay-impact-embedded / replay-impact-kafka: what a running replay does to live traffic. The promise: a
 * replay runs at a bounded rate, below live work, and never slows live traffic past its targets.
 *
 * Wiring as pipeline.ts (the sandbox in its own process, the service with SERVICE_ROLE=all on the server core). Two
 * workspaces: `live`, set up and connected, and `archive`, whose BENCH_REPLAY_EVENTS purchases are posted before its
 * forwarding is set up (dropped live: no_forwarding_setup) and drained. Then two phases of the same open-loop live
 * load (BENCH_REPLAY_LIVE_RATE conversions/s for BENCH_REPLAY_PHASE_SEC) on `live`:
 *   A. nothing else running (the baseline of this run);
 *   B. a replay of `archive`'s range running (REPLAY_MAX_EVENTS_PER_SECOND=BENCH_REPLAY_RATE), which is sized to
 *      outlast the phase.
 * Latency of each live conversion = sandbox received_at − its request's 2xx. value = phase B's p99; baseline = phase
 * A's; ratio = B / A. The replay's own rate during B is in the notes.
 */
import { randomBytes } from 'node:crypto';
import { EVENTS_PER_REQUEST } from './gateway.js';
import { SERVER_CPU, admin, runLoad, scrapeSums, sleep, startServiceChild, type ServiceChild } from './lib/proc.js';
import { round, type BenchResult } from './lib/results.js';
import { authorize, collect, connect, latencies, okTimes, startBenchSetting, summary } from './pipeline.js';

const PHASE_SEC = Number(process.env.BENCH_REPLAY_PHASE_SEC ?? 15);
const REPLAY_RATE = Number(process.env.BENCH_REPLAY_RATE ?? 500);
const ARCHIVE_EVENTS = Number(process.env.BENCH_REPLAY_EVENTS ?? REPLAY_RATE * (PHASE_SEC + 10));

export async function benchReplayImpact(runtime: 'embedded' | 'kafka', runtimeEnv: Record<string, string>, log: (l: string) => void): Promise<Omit<BenchResult, 'git_sha' | 'date'>> {
  const liveRate = Number(process.env.BENCH_REPLAY_LIVE_RATE ?? (runtime === 'kafka' ? 400 : 150));
  log(`replay-impact-${runtime} (live ${liveRate} conversions/s; replay of ${ARCHIVE_EVENTS} events at ≤ ${REPLAY_RATE}/s)`);
  const setting = await startBenchSetting(runtime, runtimeEnv, 'bench-rp-', { REPLAY_MAX_EVENTS_PER_SECOND: String(REPLAY_RATE) });
  const { info, env } = setting;
  let service: ServiceChild | undefined;
  try {
    service = await startServiceChild({ env, cpu: SERVER_CPU });
    const call = admin(service.url);
    const live = await connect(service.url, authorize);
    const archive = await call('POST', '/admin/v1/workspaces', { name: 'archive', plan: 'enterprise' });
    const archiveKey = await call('POST', `/admin/v1/workspaces/${archive.id}/api-keys`, { mode: 'live' });
    const run = randomBytes(3).toString('hex');
    const pos = { pos: 0 };

    // The archive: posted before its forwarding setup, processed (and dropped) by the live pipeline.
    const from = new Date(Date.now() - 60_000).toISOString();
    const enrichedBefore = (await scrapeSums(service.metricsUrl, 'stage')).get('stage_records_total|enrich') ?? 0;
    const archiveRequests = Math.ceil(ARCHIVE_EVENTS / EVENTS_PER_REQUEST);
    const posted = await runLoad({
      url: service.url,
      path: '/v1/events',
      headers: { authorization: `Bearer ${archiveKey.key}` },
      mode: 'closed',
      connections: 4,
      amount: archiveRequests,
      bodies: { count: archiveRequests, events: EVENTS_PER_REQUEST, seed: 7, conversionsOnly: true, keyPrefix: `${run}a` },
    });
    const archived = posted.ok * EVENTS_PER_REQUEST;
    for (const deadline = Date.now() + 180_000; ; await sleep(500)) {
      const enriched = ((await scrapeSums(service.metricsUrl, 'stage')).get('stage_records_total|enrich') ?? 0) - enrichedBefore;
      if (enriched >= archived) break;
      if (Date.now() > deadline) throw new Error(`the archive was not enriched in time (${enriched}/${archived})`);
    }
    const to = new Date(Date.now() + 60_000).toISOString();
    await call('PUT', `/admin/v1/workspaces/${archive.id}/forwarding`, {
      event_source: 'WEB',
      event_source_id: 'PIXELARCHIVE',
      pii_mode: 'hashed',
      click_window_days: 7,
      events: [{ name: 'purchase', platform_event: 'CompletePayment' }],
    });
    await authorize((await call('POST', `/admin/v1/workspaces/${archive.id}/connection`)).authorize_url);
    log(`  archive: ${archived} purchases accepted and dropped live (no forwarding setup)`);

    const reqRate = liveRate / EVENTS_PER_REQUEST;
    const requests = Math.max(4, Math.round(reqRate * PHASE_SEC));
    const phase = async (name: string) => {
      const prefix = `${run}${name}-`;
      const result = await runLoad({
        url: service!.url,
        path: '/v1/events',
        headers: { authorization: `Bearer ${live.key}` },
        recordCompletions: true,
        mode: 'open',
        connections: 64,
        rate: reqRate,
        amount: requests,
        bodies: { count: requests, events: EVENTS_PER_REQUEST, seed: name.charCodeAt(0), conversionsOnly: true, keyPrefix: `${run}${name}` },
      });
      const delivered = await collect(info.controlUrl, prefix, result.ok * EVENTS_PER_REQUEST, pos);
      const lat = summary(latencies(prefix, delivered, okTimes(result)));
      return { lat, complete: delivered.complete, accepted: result.ok * EVENTS_PER_REQUEST, delivered: delivered.at.size, gatewayP99: result.latencyMs.p99 };
    };

    const quiet = await phase('q');
    log(`  A, no replay: ${quiet.delivered}/${quiet.accepted} delivered, 2xx→platform p50 ${quiet.lat.p50} ms p99 ${quiet.lat.p99} ms; gateway p99 ${quiet.gatewayP99} ms`);
    const job = await call('POST', `/admin/v1/workspaces/${archive.id}/replays`, { from, to });
    const replayStart = Date.now();
    const busy = await phase('r');
    const during = await call('GET', `/admin/v1/workspaces/${archive.id}/replays/${job.id}`);
    const replayRate = during.events_read / ((Date.now() - replayStart) / 1000);
    log(
      `  B, replay running: ${busy.delivered}/${busy.accepted} delivered, p50 ${busy.lat.p50} ms p99 ${busy.lat.p99} ms; gateway p99 ${busy.gatewayP99} ms; ` +
        `replay ${during.status}, ${during.events_read}/${archived} read (${Math.round(replayRate)} events/s), ${during.conversions_sent} filed`,
    );
    const ratio = busy.lat.p99 / quiet.lat.p99;
    const complete = quiet.complete && busy.complete;
    const stillRunning = during.status === 'running';
    return {
      name: `replay-impact-${runtime}`,
      unit: 'ms (live p99)',
      value: busy.lat.p99,
      baseline: quiet.lat.p99,
      ratio: round(ratio, 2),
      p50_ms: busy.lat.p50,
      p99_ms: busy.lat.p99,
      target: 'live p99 with a replay running < 2 s (the pipeline target), and the replay still running through the phase',
      met: busy.lat.p99 < 2000 && complete && stillRunning,
      notes:
        `Live: open loop at ${liveRate} purchase conversions/s (${round(reqRate, 2)} requests of ${EVENTS_PER_REQUEST}/s) for ${PHASE_SEC} s per phase, SERVICE_ROLE=all on one core. ` +
        `A (no replay): p50 ${quiet.lat.p50} ms, p99 ${quiet.lat.p99} ms. B (a replay of ${archived} archived purchases of another workspace at REPLAY_MAX_EVENTS_PER_SECOND=${REPLAY_RATE}): ` +
        `p50 ${busy.lat.p50} ms, p99 ${busy.lat.p99} ms; the replay read ${Math.round(replayRate)} events/s over the phase and was ${during.status} at its end. ` +
        (complete ? 'Every live conversion was delivered.' : 'NOT every live conversion arrived in time.'),
      detail: { quiet, busy, replay: { ...during, eventsPerSec: round(replayRate, 1) }, archived },
    };
  } catch (err) {
    if (service) log(`  service output:\n${service.output().slice(-3000)}`);
    throw err;
  } finally {
    await service?.stop();
    await setting.close();
  }
}
