/**
 * The SRE kit proven against a real Prometheus (Debian's `prometheus`), on the embedded runtime: the built service
 * runs as a process, Prometheus scrapes its METRICS_PORT every second and evaluates ops/prometheus/rules, and a
 * short flow goes through the platform sandbox (accepted and rejected events, a duplicate, a platform outage, a
 * dead letter). Then every rule expression and every Grafana panel query must parse and return series: a metric
 * name that drifts from what the service exports breaks this test. The Kafka runtime's metric set:
 * test/integration/kafka-prometheus.test.ts.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type RunningSandbox } from '../sandbox/server.js';
import { freePort } from '../sandbox/ports.js';
import { expressionProblems, labelBoundProblems, metricNames, ruleExpressions, startPrometheus, type RunningPrometheus } from '../helpers/prometheus.js';
import { REPO_ROOT, startServiceProcess, type ServiceProcess } from '../helpers/service-process.js';
import { flowLogProblems, runSreFlow, sandboxServiceEnv } from '../helpers/sre-flow.js';

describe('the rules and dashboards as files', () => {
  const alerts = ruleExpressions().filter((r) => r.alert);
  const tests = parse(readFileSync(join(REPO_ROOT, 'ops/prometheus/tests/alerts.test.yml'), 'utf8')) as {
    tests: Array<{ alert_rule_test?: Array<{ alertname: string; exp_alerts?: unknown[] }> }>;
  };
  const firing = new Set(
    tests.tests.flatMap((t) => (t.alert_rule_test ?? []).filter((a) => (a.exp_alerts ?? []).length > 0).map((a) => a.alertname)),
  );
  const operations = readFileSync(join(REPO_ROOT, 'docs/operations.md'), 'utf8');
  const anchors = new Set(
    [...operations.matchAll(/^#{2,4} (.+)$/gm)].map((m) => m[1]!.trim().toLowerCase().replace(/[^a-z0-9 -]/g, '').replace(/ /g, '-')),
  );

  it.each(alerts.map((a) => [a.alert!, a]))('%s has a promtool unit test in which it fires', (name) => {
    expect(firing.has(name)).toBe(true);
  });

  it.each(alerts.map((a) => [a.alert!, a]))('%s links a runbook section of docs/operations.md', (_name, a) => {
    const link = a.annotations?.runbook_url ?? '';
    expect(link).toMatch(/^docs\/operations\.md#[a-z0-9-]+$/);
    expect(anchors.has(link.split('#')[1]!)).toBe(true);
  });

  it('finds the metric names of an expression (the lexer the drift check relies on)', () => {
    expect(
      metricNames('sum by (le) (rate(forwarder_end_to_end_seconds_bucket{le="60", code=~"a|b"}[5m])) / -min(up) > (14.4 * 0.001) and x:y:z'),
    ).toEqual(['forwarder_end_to_end_seconds_bucket', 'up', 'x:y:z']);
  });
});

describe('a real Prometheus scraping the service (embedded runtime)', () => {
  let sandbox: RunningSandbox;
  let svc: ServiceProcess;
  let prom: RunningPrometheus;

  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0 });
    svc = await startServiceProcess({ env: sandboxServiceEnv(sandbox, await freePort()) });
    prom = await startPrometheus([new URL(svc.metricsUrl).host]);
  });
  afterAll(async () => {
    await prom?.stop();
    await svc?.stop();
    await sandbox?.close();
  });

  it('serves health and readiness on the metrics port beside /metrics', async () => {
    const base = svc.metricsUrl.replace(/\/metrics$/, '');
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    const ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready' });
  });

  describe('bad input on the metrics port', () => {
    it.each([
      ['GET', '/nope', 404],
      ['POST', '/metrics', 405],
      ['DELETE', '/readyz', 405],
    ])('%s %s answers %i', async (method, path, status) => {
      const r = await fetch(`${svc.metricsUrl.replace(/\/metrics$/, '')}${path}`, { method });
      expect(r.status).toBe(status);
    });
  });

  it('drives a flow whose every rule expression and panel query parses and returns series', async () => {
    const flow = await runSreFlow(svc.url, sandbox, prom);
    const value = async (expr: string): Promise<number> => Number((await prom.query(expr))[0]?.value[1] ?? NaN);

    // Counted per event on both sides: 5 accepted (2 + 2 + the duplicate), 4 rejected (3 + 1).
    expect(await value('sum(events_ingested_total{outcome="accepted"})')).toBe(5);
    expect(await value('sum(events_ingested_total{outcome="rejected"})')).toBe(4);
    expect(await value('sum(events_ingested_total{outcome="rejected",reason="unauthorized"})')).toBe(1);
    expect(await value('max(dead_letters{stage="forwarder"})')).toBe(2);
    expect(await value('max(forwarder_connections{status="connected"})')).toBe(1);
    expect(await value('sum(forwarder_conversions_total{outcome="retried"})')).toBeGreaterThanOrEqual(2);
    expect(await value('max(dependency_up{dependency="postgres"})')).toBe(1);
    expect(await value('max(consumer_lag_records{stage="forwarder"})')).toBe(0);
    // The dry-run replay read the four accepted events again and has ended.
    expect(await value('sum(replay_events_read_total)')).toBe(4);
    expect(await value('sum(replay_conversions_total{outcome="sent"})')).toBe(0);
    expect(await value('max(replay_jobs{status="queued"}) + max(replay_jobs{status="running"})')).toBe(0);
    expect(await value('min(replay_slowest_progress_ratio)')).toBe(1);

    expect(await expressionProblems(prom, 'embedded')).toEqual([]);
    expect(await labelBoundProblems(prom)).toEqual([]);

    // Logs: one JSON line per request, and the request id follows its events to the forwarder's batch line.
    expect(flowLogProblems(svc.output(), flow)).toEqual([]);
  }, 90_000);
});
