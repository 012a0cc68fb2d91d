/** One JSON file per benchmark under bench/results/, and the table in bench/README.md between its markers. */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './proc.js';

export interface BenchResult {
  readonly name: string;
  readonly unit: string;
  readonly value: number;
  /** The baseline measured in the same run (null when the benchmark has none). */
  readonly baseline: number | null;
  /** value / baseline (null without a baseline). */
  readonly ratio: number | null;
  readonly p50_ms: number | null;
  readonly p99_ms: number | null;
  readonly git_sha: string;
  readonly date: string;
  readonly notes: string;
  /** Target of the issue, for the table: e.g. "ratio >= 0.5, p99 < 50 ms". */
  readonly target?: string;
  readonly met?: boolean | null;
  /** Which Kafka client ran where (Kafka benchmarks), e.g. "gateway producer: @platformatic/kafka; stage runner: kafkajs". */
  readonly kafka_client?: string;
  /** Everything else measured (phases, counts), for whoever reads the file. */
  readonly detail?: unknown;
}

/** The service's Kafka clients, as this commit wires them (shared/kafka/producer.ts, shared/kafka/consumer.ts). */
export const SERVICE_KAFKA_CLIENTS = 'every producer (gateway, the stages\' transactional producers, dead-letter relay, redrive), the stages\' group consumers and the admin: @platformatic/kafka 2.x';

export const RESULTS_DIR = join(REPO_ROOT, 'bench', 'results');
export const PROFILES_DIR = join(REPO_ROOT, 'bench', 'profiles');

export function gitSha(): string {
  const sha = spawnSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: REPO_ROOT, encoding: 'utf8' }).stdout.trim() || 'unknown';
  const dirty = spawnSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: REPO_ROOT, encoding: 'utf8' }).stdout.trim() !== '';
  return dirty ? `${sha}+dirty` : sha;
}

export const round = (v: number, digits = 2): number => {
  const f = 10 ** digits;
  return Math.round(v * f) / f;
};

export function writeResult(r: BenchResult): string {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const file = join(RESULTS_DIR, `${r.name}.json`);
  writeFileSync(file, `${JSON.stringify(r, null, 2)}\n`);
  return file;
}

export function readResults(): BenchResult[] {
  if (!existsSync(RESULTS_DIR)) return [];
  return readdirSync(RESULTS_DIR)
    .filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(readFileSync(join(RESULTS_DIR, f), 'utf8')) as BenchResult);
}

const ORDER = ['gateway-embedded', 'gateway-kafka', 'pipeline-embedded', 'pipeline-kafka', 'pipeline-drain-kafka', 'pipeline-drain-kafka-500-people', 'dedupe-memory', 'dedupe-memory-generic', 'kafka-client'];

const fmt = (v: number | null | undefined, digits = 2): string => {
  if (v === null || v === undefined || Number.isNaN(v)) return '–';
  if (Math.abs(v) >= 1000) return Math.round(v).toLocaleString('en-US');
  return String(round(v, digits));
};

export function resultsTable(results: readonly BenchResult[]): string {
  const sorted = [...results].sort((a, b) => (ORDER.indexOf(a.name) + 100 * +(ORDER.indexOf(a.name) < 0)) - (ORDER.indexOf(b.name) + 100 * +(ORDER.indexOf(b.name) < 0)));
  const rows = sorted.map(
    (r) =>
      `| ${r.name} | ${fmt(r.value)} ${r.unit} | ${r.baseline === null ? '–' : fmt(r.baseline)} | ${fmt(r.ratio, 3)} | ${fmt(r.p50_ms)} | ${fmt(r.p99_ms)} | ${r.target ?? '–'} | ${r.met === undefined || r.met === null ? '–' : r.met ? 'yes' : '**no**'} | ${r.git_sha} | ${r.date.slice(0, 16).replace('T', ' ')} |`,
  );
  return [
    '| benchmark | value | baseline | ratio | p50 ms | p99 ms | target | met | git | date (UTC) |',
    '|---|---|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}

const START = '<!-- results:start (written by `make bench`) -->';
const END = '<!-- results:end -->';

/** Rewrites the table between the markers of bench/README.md (creates the file with the markers if missing). */
export function updateReadme(extra: string): void {
  const file = join(REPO_ROOT, 'bench', 'README.md');
  const table = `${START}\n${resultsTable(readResults())}\n\n${extra}\n${END}`;
  let text = existsSync(file) ? readFileSync(file, 'utf8') : `# Benchmarks\n\n${START}\n${END}\n`;
  const a = text.indexOf(START);
  const b = text.indexOf(END);
  text = a >= 0 && b > a ? `${text.slice(0, a)}${table}${text.slice(b + END.length)}` : `${text}\n${table}\n`;
  writeFileSync(file, text);
}
