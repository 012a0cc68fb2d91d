/**
 * infra/helm/event-forwarder: `helm lint`, `helm template` for the default values and each scenario of ci/, every
 * rendered object decoded strictly into the Kubernetes API's Go types (infra/helm/kube-validate), every role's
 * environment checked against the service's configuration, and what a production install needs (probes, drain,
 * securityContext, disruption budgets, the autoscaler, the migrations hook, the rules of ops/prometheus).
 * helm and kube-validate are built by `make helm-tools` (a step of `make test`).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../helpers/infra.js';
import { DEPLOYED_ROLES, roleEnvProblems } from './role-env.js';

const CHART = join(REPO_ROOT, 'infra', 'helm', 'event-forwarder');
const tool = (name: string): string => execFileSync('bash', [join(REPO_ROOT, 'infra', 'helm', 'tools.sh'), 'path', name], { encoding: 'utf8' }).trim();
const HELM = tool('helm');
const VALIDATE = tool('kube-validate');
// The Kubernetes release whose API kube-validate decodes with (k8s.io/api v0.37.2): helm renders for it too (a helm
// built with `go install` otherwise assumes 1.20, which the chart's kubeVersion refuses).
const KUBE_VERSION = '1.37.0';
const SCENARIOS = ['default', ...readdirSync(join(CHART, 'ci')).filter((f) => f.endsWith('-values.yaml')).sort()];

type Obj = Record<string, any>;

/** stdout alone in `out` (helm warns on stderr, e.g. about the rules' symlink), both in `all`. */
function run(cmd: string, args: string[], input?: string): { status: number | null; out: string; all: string } {
  const r = spawnSync(cmd, args, { input, encoding: 'utf8', maxBuffer: 32 * 1024 * 1024 });
  return { status: r.status, out: r.stdout, all: `${r.stdout}${r.stderr}` };
}

const valuesArgs = (scenario: string): string[] => (scenario === 'default' ? [] : ['--values', join(CHART, 'ci', scenario)]);

function template(scenario: string, extra: string[] = []): ReturnType<typeof run> {
  return run(HELM, ['template', 'ef', CHART, '--namespace', 'events', '--kube-version', KUBE_VERSION, ...valuesArgs(scenario), ...extra]);
}

function objects(rendered: string): Obj[] {
  return parseAllDocuments(rendered)
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => o !== null && typeof o === 'object');
}

/** What a Secret managed outside the chart holds (values.yaml, secrets.existingSecret). */
const EXISTING_SECRET: Record<string, string> = {
  ADMIN_TOKEN: 'an-admin-token-of-at-least-16-characters',
  CREDENTIALS_KEY: Buffer.alloc(32, 1).toString('base64'),
  DATABASE_URL: 'postgres://events:pw@postgres.db.svc:5432/events',
  PLATFORM_APP_SECRET: 'tiktok-secret',
};

/** A container's environment as the process sees it: its env, and the ConfigMaps and Secrets of envFrom. */
function containerEnv(container: Obj, all: Obj[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const from of container.envFrom ?? []) {
    if (from.configMapRef) {
      const cm = all.find((o) => o.kind === 'ConfigMap' && o.metadata.name === from.configMapRef.name);
      if (!cm) throw new Error(`envFrom names ConfigMap ${from.configMapRef.name}, which the chart does not make`);
      Object.assign(env, cm.data);
    }
    if (from.secretRef) {
      const secret = all.find((o) => o.kind === 'Secret' && o.metadata.name === from.secretRef.name);
      const data = secret
        ? Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(String(v), 'base64').toString()]))
        : EXISTING_SECRET;
      Object.assign(env, data);
    }
  }
  for (const e of container.env ?? []) {
    if (e.value !== undefined) env[e.name] = String(e.value);
    else if (e.valueFrom?.secretKeyRef) env[e.name] = EXISTING_SECRET[e.valueFrom.secretKeyRef.key] ?? 'from-a-secret';
  }
  return env;
}

describe('the Helm chart', () => {
  it('passes helm lint, with each scenario', () => {
    for (const scenario of SCENARIOS) {
      const r = run(HELM, ['lint', '--strict', '--kube-version', KUBE_VERSION, CHART, ...valuesArgs(scenario)]);
      expect(r.status, `${scenario}\n${r.all}`).toBe(0);
    }
  });

  describe.each(SCENARIOS)('rendered with %s', (scenario) => {
    const rendered = template(scenario);
    const all = rendered.status === 0 ? objects(rendered.out) : [];
    const byKind = (kind: string): Obj[] => all.filter((o) => o.kind === kind);

    it('renders, and every object decodes strictly into its Kubernetes API type', () => {
      expect(rendered.status, rendered.all).toBe(0);
      const v = run(VALIDATE, [], rendered.out);
      expect(v.status, v.all).toBe(0);
    });

    it.each(DEPLOYED_ROLES)('gives the %s role a Deployment with the environment the service needs', (role) => {
      const deployment = byKind('Deployment').find((d) => d.metadata.labels['app.kubernetes.io/component'] === role);
      expect(deployment, `no Deployment for ${role}`).toBeDefined();
      const pod = deployment!.spec.template.spec;
      const [container] = pod.containers;
      expect(roleEnvProblems(role, containerEnv(container, all))).toEqual([]);
      expect(container.readinessProbe.httpGet.path).toBe('/readyz');
      expect(container.livenessProbe.httpGet.path).toBe('/healthz');
      expect(container.resources.requests.cpu).toBeTruthy();
      expect(container.resources.limits.memory).toBeTruthy();
      expect(container.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
      expect(pod.securityContext.runAsNonRoot).toBe(true);
      // The drain ends within 20 s of SIGTERM (services/compose/main.ts), after the preStop pause.
      expect(pod.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(container.lifecycle.preStop.sleep.seconds + 20);
      expect(deployment!.spec.strategy.rollingUpdate.maxUnavailable).toBe(0);
      const pdbs = byKind('PodDisruptionBudget').filter((p) => p.spec.selector.matchLabels['app.kubernetes.io/component'] === role);
      expect(pdbs).toHaveLength(1);
    });

    it('runs the migrations as a Job before an upgrade', () => {
      const [job] = byKind('Job');
      expect(job.metadata.annotations['helm.sh/hook']).toContain('pre-upgrade');
      expect(job.spec.template.spec.containers[0].command).toEqual(['node', 'dist/services/bin/migrate.js']);
      expect(Object.keys(containerEnv(job.spec.template.spec.containers[0], all))).toEqual(['DATABASE_URL']);
    });
  });

  it('scales the gateway on CPU by default, with a NetworkPolicy and no monitoring CRDs', () => {
    const all = objects(template('default').out);
    const [hpa] = all.filter((o) => o.kind === 'HorizontalPodAutoscaler');
    expect(hpa.spec.scaleTargetRef.name).toBe('ef-event-forwarder-gateway');
    expect(hpa.spec.metrics[0].resource.name).toBe('cpu');
    expect(all.filter((o) => o.kind === 'NetworkPolicy').length).toBeGreaterThan(0);
    expect(all.filter((o) => o.apiVersion === 'monitoring.coreos.com/v1')).toEqual([]);
  });

  it('builds the PrometheusRule from every group of ops/prometheus/rules', () => {
    const all = objects(template('monitoring-values.yaml').out);
    const rule = all.find((o) => o.kind === 'PrometheusRule')!;
    const dir = join(REPO_ROOT, 'ops', 'prometheus', 'rules');
    const groups = readdirSync(dir)
      .filter((f) => f.endsWith('.yml'))
      .sort()
      .flatMap((f) => (parse(readFileSync(join(dir, f), 'utf8')) as Obj).groups);
    expect(rule.spec.groups).toEqual(groups);
    expect(all.find((o) => o.kind === 'ServiceMonitor')!.spec.jobLabel).toBe('event-forwarder/job');
  });

  it('scales the stages on their consumer group lag with KEDA', () => {
    const all = objects(template('keda-values.yaml').out);
    const scaled = all.filter((o) => o.kind === 'ScaledObject');
    expect(scaled.map((s) => [s.spec.triggers[0].metadata.consumerGroup, s.spec.triggers[0].metadata.topic])).toEqual([
      ['prod-dedupe', 'events.raw'],
      ['prod-enrich', 'events.deduped'],
      ['prod-forwarder', 'conversions.ready'],
    ]);
    // KEDA's HPA owns their replica count; the Deployment must not fight it.
    for (const s of scaled) expect(all.find((o) => o.kind === 'Deployment' && o.metadata.name === s.spec.scaleTargetRef.name)!.spec.replicas).toBeUndefined();
  });

  it('keeps secrets from an existing Secret and migrates before the first install then', () => {
    const all = objects(template('existing-secret-values.yaml').out);
    expect(all.filter((o) => o.kind === 'Secret')).toEqual([]);
    const job = all.find((o) => o.kind === 'Job')!;
    expect(job.metadata.annotations['helm.sh/hook']).toBe('pre-install,pre-upgrade');
  });

  describe('bad input', () => {
    it.each([
      ['no brokers', ['--set', 'kafka.brokers='], /kafka.brokers is required/],
      ['no database', ['--set', 'secrets.databaseUrl='], /secrets.databaseUrl/],
      ['a KEDA stage that is not a stage', ['--set', 'autoscaling.keda.enabled=true', '--set', 'autoscaling.keda.stages={gateway}'], /not a stage/],
    ])('refuses to render with %s', (_what, args, message) => {
      const r = template('default', args as string[]);
      expect(r.status).not.toBe(0);
      expect(r.all).toMatch(message);
    });

    const deployment = objects(template('default').out).find((o) => o.kind === 'Deployment')!;
    it.each([
      ['an unknown field', (d: Obj) => (d.spec.replica = 2)],
      ['a field of the wrong type', (d: Obj) => (d.spec.replicas = 'two')],
      ['an unknown container field', (d: Obj) => (d.spec.template.spec.containers[0].imagePolicy = 'x')],
      ['an unknown kind', (d: Obj) => (d.kind = 'Deploymnet')],
      ['an unknown apiVersion', (d: Obj) => (d.apiVersion = 'apps/v9')],
      ['no name', (d: Obj) => delete d.metadata.name],
    ])('kube-validate refuses a Deployment with %s', (_what, breakIt) => {
      const d = structuredClone(deployment);
      breakIt(d);
      const r = run(VALIDATE, [], JSON.stringify(d));
      expect(r.status, r.all).toBe(1);
      expect(r.out).toContain('REFUSED');
    });
  });

  it('has its tools built (make helm-tools)', () => {
    expect(existsSync(HELM) && existsSync(VALIDATE)).toBe(true);
  });
});
