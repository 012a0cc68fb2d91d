/**
 * Debian's real Prometheus for tests: started on a free port with its own temporary data directory, scraping the
 * service's METRICS_PORT every second and evaluating ops/prometheus/rules every second. Also reads what the
 * ops/ files ask of Prometheus (every rule expression, every dashboard panel query) so a test can run them all.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { freePort } from '../sandbox/ports.js';
import { REPO_ROOT } from './service-process.js';

export const RULES_DIR = join(REPO_ROOT, 'ops', 'prometheus', 'rules');
export const DASHBOARDS_DIR = join(REPO_ROOT, 'ops', 'grafana', 'dashboards');
/** The job name the alerts select (ops/prometheus/prometheus.example.yml). */
export const JOB = 'event-forwarder';

export interface RunningPrometheus {
  readonly url: string;
  /** An instant query; throws when Prometheus refuses it (a parse error names the expression). */
  query(expr: string): Promise<Array<{ metric: Record<string, string>; value: [number, string] }>>;
  /**
   * Waits until every target has been scraped twice after `sinceMs` (a rate needs two samples of a new series) and
   * every rule group evaluated after that: the queries then see everything that happened before `sinceMs`.
   */
  settledSince(sinceMs: number, timeoutMs?: number): Promise<void>;
  output(): string;
  stop(): Promise<void>;
}

/** Installs Debian's prometheus package when missing (the Makefile's `test` target does the same first). */
export function ensurePrometheus(): void {
  execFileSync('bash', [join(REPO_ROOT, 'ops', 'prometheus', 'promtool.sh'), 'ensure'], { stdio: 'inherit' });
}

export async function startPrometheus(targets: readonly string[]): Promise<RunningPrometheus> {
  ensurePrometheus();
  const dir = mkdtempSync(join(tmpdir(), 'prom-'));
  const port = await freePort();
  const ruleFiles = readdirSync(RULES_DIR)
    .filter((f) => f.endsWith('.yml'))
    .map((f) => join(RULES_DIR, f));
  const config = {
    global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
    rule_files: ruleFiles,
    scrape_configs: [{ job_name: JOB, static_configs: [{ targets }] }],
  };
  writeFileSync(join(dir, 'prometheus.yml'), JSON.stringify(config)); // JSON is YAML
  const child: ChildProcess = spawn(
    'prometheus',
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`prometheus exited with ${child.exitCode}:\n${out}`);
    const ready = await fetch(`${url}/-/ready`).then((r) => r.status === 200, () => false);
    if (ready) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`prometheus not ready within 30 s:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    async query(expr) {
      const r = await fetch(`${url}/api/v1/query`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ query: expr }),
      });
      const body = (await r.json()) as { status: string; error?: string; data?: { resultType: string; result: unknown } };
      if (body.status !== 'success') throw new Error(`prometheus refused ${expr}: ${body.error}`);
      const result = body.data!.result;
      return Array.isArray(result) ? (result as Array<{ metric: Record<string, string>; value: [number, string] }>) : [];
    },
    async settledSince(sinceMs, timeoutMs = 30_000) {
      const api = async <T>(path: string): Promise<T> => ((await (await fetch(`${url}${path}`)).json()) as { data: T }).data;
      const lastScrape = async (): Promise<number> => {
        const { activeTargets } = await api<{ activeTargets: Array<{ lastScrape: string }> }>('/api/v1/targets');
        return activeTargets.length === 0 ? 0 : Math.min(...activeTargets.map((t) => Date.parse(t.lastScrape)));
      };
      const deadline = Date.now() + timeoutMs;
      const until = async (what: string, done: () => Promise<boolean>): Promise<void> => {
        while (!(await done())) {
          if (Date.now() > deadline) throw new Error(`prometheus: timed out after ${timeoutMs} ms waiting for ${what}`);
          await new Promise((r) => setTimeout(r, 100));
        }
      };
      let first = 0;
      await until('a scrape', async () => (first = await lastScrape()) > sinceMs);
      let second = 0;
      await until('a second scrape', async () => (second = await lastScrape()) > first);
      await until('the rules evaluated', async () => {
        const { groups } = await api<{ groups: Array<{ lastEvaluation: string }> }>('/api/v1/rules');
        return groups.every((g) => Date.parse(g.lastEvaluation) > second);
      });
    },
    output: () => out,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface RuleExpr {
  readonly file: string;
  /** `record: name` or `alert: Name`. */
  readonly rule: string;
  readonly expr: string;
  /** The recorded series' name, for recording rules. */
  readonly record?: string;
  readonly alert?: string;
  readonly annotations?: Record<string, string>;
}

export function ruleExpressions(): RuleExpr[] {
  const out: RuleExpr[] = [];
  for (const file of readdirSync(RULES_DIR).filter((f) => f.endsWith('.yml'))) {
    const doc = parse(readFileSync(join(RULES_DIR, file), 'utf8')) as {
      groups: Array<{ rules: Array<{ record?: string; alert?: string; expr: string; annotations?: Record<string, string> }> }>;
    };
    for (const g of doc.groups) {
      for (const r of g.rules) {
        out.push({
          file,
          rule: r.record ? `record: ${r.record}` : `alert: ${r.alert}`,
          expr: r.expr.trim(),
          record: r.record,
          alert: r.alert,
          annotations: r.annotations,
        });
      }
    }
  }
  return out;
}

export interface PanelQuery {
  readonly dashboard: string;
  readonly panel: string;
  readonly expr: string;
}

export function dashboardQueries(): PanelQuery[] {
  const out: PanelQuery[] = [];
  for (const file of readdirSync(DASHBOARDS_DIR).filter((f) => f.endsWith('.json'))) {
    const d = JSON.parse(readFileSync(join(DASHBOARDS_DIR, file), 'utf8')) as {
      title: string;
      panels: Array<{ title: string; targets?: Array<{ expr?: string }> }>;
    };
    for (const p of d.panels) for (const t of p.targets ?? []) if (t.expr) out.push({ dashboard: d.title, panel: p.title, expr: t.expr });
  }
  return out;
}

const KEYWORDS = new Set(['and', 'or', 'unless', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'offset', 'inf', 'nan']);

/**
 * The metric names a PromQL expression selects (a small lexer: strings, label matchers, ranges and grouping
 * clauses removed; what remains and is not a function call, keyword or number is a metric name).
 */
export function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const m of stripped.matchAll(/([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?/g)) {
    if (m[2]) continue; // a function call
    const name = m[1]!;
    if (KEYWORDS.has(name.toLowerCase()) || /^\d/.test(name)) continue;
    names.add(name);
  }
  return [...names];
}

/** Metrics only the Kafka runtime exports (the embedded runtime's test does not expect them). */
export const KAFKA_ONLY = [/^kafka_/, /^state_store_restore/];
export const isKafkaOnly = (name: string): boolean => KAFKA_ONLY.some((re) => re.test(name));

/** Every rule expression and panel query that does not parse or returns no series (empty: all good). */
export async function expressionProblems(prom: RunningPrometheus, runtime: 'embedded' | 'kafka'): Promise<string[]> {
  const problems: string[] = [];
  const exists = async (name: string): Promise<boolean> => (await prom.query(`count({__name__="${name}"})`)).length > 0;
  for (const r of ruleExpressions()) {
    try {
      const rows = await prom.query(r.expr);
      if (r.record) {
        if (rows.length === 0) problems.push(`${r.file} ${r.rule}: no series`);
        if (!(await exists(r.record))) problems.push(`${r.file} ${r.rule}: the recorded series is missing`);
      }
      // An alert returns series only when it fires: every metric it selects must exist instead.
      for (const name of metricNames(r.expr)) if (!(await exists(name))) problems.push(`${r.file} ${r.rule}: no series named ${name}`);
    } catch (err) {
      problems.push(`${r.file} ${r.rule}: ${(err as Error).message}`);
    }
  }
  for (const q of dashboardQueries()) {
    try {
      if ((await prom.query(q.expr)).length > 0) continue;
      const expected = metricNames(q.expr).filter((n) => runtime === 'kafka' || !isKafkaOnly(n));
      if (expected.length > 0) problems.push(`${q.dashboard} / ${q.panel}: no series for ${q.expr}`);
    } catch (err) {
      problems.push(`${q.dashboard} / ${q.panel}: ${(err as Error).message}`);
    }
  }
  return problems;
}

/** Label names that would make one series per customer, key, request or person (docs/operations.md, "Metrics"). */
export const UNBOUNDED_LABELS = ['workspace', 'workspace_id', 'ws', 'key', 'key_id', 'api_key', 'request_id', 'event_id', 'user', 'user_id', 'email', 'phone', 'replay', 'job'];
/** The most distinct values a label of ours may take in the flows the tests drive. */
export const LABEL_VALUE_CAP = 50;

/**
 * What Prometheus scraped from the service that breaks the label bounds: a label named like a customer or person,
 * or a label with more values than LABEL_VALUE_CAP (empty: all good). Prometheus' own labels are left out.
 */
export async function labelBoundProblems(prom: RunningPrometheus): Promise<string[]> {
  const get = async (path: string): Promise<string[]> => {
    const r = await fetch(`${prom.url}${path}`);
    if (!r.ok) throw new Error(`Prometheus ${path}: ${r.status}`);
    return ((await r.json()) as { data: string[] }).data;
  };
  const selector = `match[]=${encodeURIComponent(`{job="${JOB}"}`)}`;
  const problems: string[] = [];
  for (const label of await get(`/api/v1/labels?${selector}`)) {
    if (['__name__', 'instance', 'job', 'le', 'quantile'].includes(label)) continue;
    if (UNBOUNDED_LABELS.includes(label)) problems.push(`a label named ${label}`);
    const values = await get(`/api/v1/label/${label}/values?${selector}`);
    if (values.length > LABEL_VALUE_CAP) problems.push(`${label}: ${values.length} values`);
  }
  return problems;
}
