/**
 * infra/compose/compose.yaml: valid against the Compose specification's JSON schema (infra/compose/
 * compose-spec.schema.json, vendored: see infra/compose/README.md), and a whole deployment: every role a service
 * with the variables the service needs, the migrations first, the gateway replicated, the backing services, the
 * files it mounts present in the repo.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { Ajv } from 'ajv';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../helpers/infra.js';
import { DEPLOYED_ROLES, roleEnvProblems } from './role-env.js';

const COMPOSE_FILE = join(REPO_ROOT, 'infra', 'compose', 'compose.yaml');
// A draft-07 schema; its $schema URL lacks the trailing '#' under which Ajv knows draft-07, so it is dropped.
const { $schema: _draft, ...schema } = JSON.parse(readFileSync(join(REPO_ROOT, 'infra', 'compose', 'compose-spec.schema.json'), 'utf8'));
const ajv = new Ajv({ strict: false, allErrors: true });
const validate = ajv.compile(schema);

type Doc = Record<string, any>;
const load = (): Doc => parse(readFileSync(COMPOSE_FILE, 'utf8'), { merge: true }) as Doc;

/** What an operator's .env gives (infra/compose/.env.example, filled in). */
const DOT_ENV: Record<string, string> = {
  POSTGRES_PASSWORD: 'pg-secret',
  ADMIN_TOKEN: 'admin-token-0123456789abcdef',
  CREDENTIALS_KEY: Buffer.alloc(32, 7).toString('base64'),
  GRAFANA_ADMIN_PASSWORD: 'grafana-secret',
};

/** Compose's interpolation: ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}, ${VAR?error}. */
function interpolate(value: string, vars: Record<string, string>): string {
  return value.replace(/\$\{([A-Z0-9_]+)(?:(:?)([-?])([^}]*))?\}/g, (_m, name: string, colon: string, op: string, arg: string) => {
    const v = vars[name];
    const unset = v === undefined || (colon === ':' && v === '');
    if (!unset) return v;
    if (op === '?') throw new Error(`${name}: ${arg}`);
    return op === '-' ? arg : '';
  });
}

/** A service's environment as its process sees it (list or map form), interpolated, empty values dropped. */
function serviceEnv(service: Doc, vars: Record<string, string>): Record<string, string> {
  const raw: Record<string, unknown> = Array.isArray(service.environment)
    ? Object.fromEntries((service.environment as string[]).map((kv) => [kv.split('=')[0], kv.slice(kv.indexOf('=') + 1)]))
    : (service.environment ?? {});
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(raw)) {
    const s = interpolate(String(v ?? ''), vars);
    if (s !== '') env[k] = s;
  }
  return env;
}

describe('infra/compose/compose.yaml', () => {
  const doc = load();

  it('is valid against the Compose specification schema', () => {
    expect(validate(doc), ajv.errorsText(validate.errors, { separator: '\n' })).toBe(true);
  });

  it.each(DEPLOYED_ROLES)('runs the %s role as a service with the variables it needs', (role) => {
    const service = doc.services[role];
    expect(service, `no service ${role}`).toBeDefined();
    expect(roleEnvProblems(role, serviceEnv(service, DOT_ENV))).toEqual([]);
    expect(service.read_only).toBe(true);
    expect(service.user).toMatch(/^[1-9]\d*:[1-9]\d*$/);
    expect(service.depends_on.migrate.condition).toBe('service_completed_successfully');
    expect(service.healthcheck.test.join(' ')).toContain('/readyz');
  });

  it('replicates the gateway and runs the migrations once', () => {
    expect(Number(interpolate(String(doc.services.gateway.deploy.replicas), {}))).toBeGreaterThanOrEqual(2);
    expect(doc.services.migrate.restart).toBe('no');
    expect(doc.services.migrate.entrypoint).toEqual(['node', 'dist/services/bin/migrate.js']);
    expect(Object.keys(serviceEnv(doc.services.migrate, DOT_ENV))).toEqual(['DATABASE_URL']);
  });

  it.each([['kafka'], ['registry'], ['postgres'], ['redis'], ['prometheus'], ['grafana']])('has the backing service %s', (name) => {
    expect(doc.services[name]?.image).toBeTruthy();
  });

  it('refuses to start without the secrets of .env', () => {
    expect(() => serviceEnv(doc.services.gateway, {})).toThrow(/POSTGRES_PASSWORD|ADMIN_TOKEN|CREDENTIALS_KEY/);
  });

  it('mounts files that exist: ops/prometheus/rules, ops/grafana provisioning and dashboards', () => {
    const mounts = Object.values(doc.services as Record<string, Doc>).flatMap((s) =>
      ((s.volumes ?? []) as string[]).filter((v) => v.startsWith('.')).map((v) => v.split(':')[0]!),
    );
    expect(mounts).toEqual(expect.arrayContaining(['../../ops/prometheus/rules', '../../ops/grafana/provisioning/dashboards', '../../ops/grafana/dashboards']));
    for (const m of mounts) expect(existsSync(resolve(dirname(COMPOSE_FILE), m)), m).toBe(true);
    const prometheus = parse(readFileSync(join(dirname(COMPOSE_FILE), 'prometheus.yml'), 'utf8')) as Doc;
    const scraped: string[] = prometheus.scrape_configs[0].dns_sd_configs[0].names;
    expect([...scraped].sort()).toEqual([...DEPLOYED_ROLES].sort());
    expect(prometheus.scrape_configs[0].job_name).toBe('event-forwarder');
  });

  describe('bad input: the schema check refuses a broken file', () => {
    const broken: Array<[string, (d: Doc) => void]> = [
      ['an unknown service key', (d) => (d.services.gateway.imagee = 'x')],
      ['replicas that are not a number', (d) => (d.services.gateway.deploy.replicas = { n: 2 })],
      ['an unknown depends_on condition', (d) => (d.services.dedupe.depends_on.migrate.condition = 'service_done')],
      ['a healthcheck test that is a number', (d) => (d.services.console.healthcheck.test = 5)],
      ['an unknown top-level key', (d) => (d.servics = {})],
      ['a volume entry that is a number', (d) => (d.services.grafana.volumes = [3])],
    ];
    it.each(broken)('%s', (_what, breakIt) => {
      const d = load();
      breakIt(d);
      expect(validate(d)).toBe(false);
    });

    it.each<[string, Record<string, string>, RegExp]>([
      ['a variable the service does not read', { GATEWAY_REPLICA: '2' }, /does not read/],
      ['a bad value', { METRICS_PORT: 'ninety' }, /METRICS_PORT/],
      ['no credentials key', { CREDENTIALS_KEY: '' }, /CREDENTIALS_KEY/],
    ])('a role environment with %s is refused', (_what, change, problem) => {
      const env: Record<string, string> = { ...serviceEnv(load().services.enrich, DOT_ENV), ...change };
      for (const [k, v] of Object.entries(env)) if (v === '') delete env[k];
      expect(roleEnvProblems('enrich', env).join('\n')).toMatch(problem);
    });
  });
});
