import { describe, expect, it } from 'vitest';
import { ConfigError, DEFAULT_PLAN_LIMITS, loadConfig } from './config.js';

describe('config: defaults of the operator contract', () => {
  it('an empty environment is the embedded default', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      port: 8080,
      dataDir: './data',
      publicBaseUrl: 'http://localhost:8080',
      metricsPort: 9464,
      role: 'all',
      graphSinkRole: 'enrich',
      kafka: undefined,
      databaseUrl: undefined,
      redisUrl: undefined,
      credentialsKey: undefined,
      planLimits: DEFAULT_PLAN_LIMITS,
      adminTokenGenerated: true,
      platform: {
        apiBase: 'https://business-api.tiktok.com/open_api/v1.3',
        authUrl: 'https://business-api.tiktok.com/portal/auth',
        appId: undefined,
        appSecret: undefined,
      },
    });
    expect(c.adminToken.length).toBeGreaterThanOrEqual(32);
  });

  it('PUBLIC_BASE_URL follows PORT', () => {
    expect(loadConfig({ PORT: '9000' }).publicBaseUrl).toBe('http://localhost:9000');
  });

  it('reads every variable', () => {
    const key = Buffer.alloc(32, 7).toString('base64');
    const c = loadConfig({
      PORT: '1234',
      DATA_DIR: '/tmp/x',
      ADMIN_TOKEN: 'a'.repeat(20),
      PUBLIC_BASE_URL: 'https://ingest.example.com/',
      CREDENTIALS_KEY: key,
      PLATFORM_API_BASE: 'http://127.0.0.1:9900/open_api/v1.3',
      PLATFORM_AUTH_URL: 'http://127.0.0.1:9900/portal/auth',
      PLATFORM_APP_ID: 'app',
      PLATFORM_APP_SECRET: 'secret',
      KAFKA_BROKERS: 'a:9092,b:9093',
      KAFKA_GROUP_PREFIX: 'blue-',
      SCHEMA_REGISTRY_URL: 'http://reg:8081',
      DATABASE_URL: 'postgres://u@h:5432/db',
      REDIS_URL: 'redis://127.0.0.1:6379',
      METRICS_PORT: '9999',
      SERVICE_ROLE: 'gateway',
      GRAPH_SINK_ROLE: 'identity-sink',
      PLAN_LIMITS: '{"gold":{"rps":5,"burst":10}}',
    });
    expect(c).toMatchObject({
      port: 1234,
      dataDir: '/tmp/x',
      adminToken: 'a'.repeat(20),
      adminTokenGenerated: false,
      publicBaseUrl: 'https://ingest.example.com',
      kafka: { brokers: ['a:9092', 'b:9093'], schemaRegistryUrl: 'http://reg:8081', groupPrefix: 'blue-', sessionTimeoutMs: 10_000 },
      databaseUrl: 'postgres://u@h:5432/db',
      redisUrl: 'redis://127.0.0.1:6379',
      metricsPort: 9999,
      role: 'gateway',
      graphSinkRole: 'identity-sink',
      planLimits: { gold: { rps: 5, burst: 10 } },
    });
    expect(c.credentialsKey?.length).toBe(32);
  });
});

describe('config: a bad value names the variable in one line', () => {
  it.each([
    ['PORT', { PORT: 'eighty' }],
    ['GRAPH_SINK_ROLE', { GRAPH_SINK_ROLE: 'forwarder' }],
    ['PORT', { PORT: '70000' }],
    ['METRICS_PORT', { METRICS_PORT: '-1' }],
    ['ADMIN_TOKEN', { ADMIN_TOKEN: 'short' }],
    ['PUBLIC_BASE_URL', { PUBLIC_BASE_URL: 'not a url' }],
    ['CREDENTIALS_KEY', { CREDENTIALS_KEY: Buffer.alloc(16).toString('base64') }],
    ['PLATFORM_API_BASE', { PLATFORM_API_BASE: 'nope' }],
    ['KAFKA_BROKERS', { KAFKA_BROKERS: 'localhost', SCHEMA_REGISTRY_URL: 'http://r:1' }],
    ['SCHEMA_REGISTRY_URL', { KAFKA_BROKERS: 'localhost:9092' }],
    ['DATABASE_URL', { KAFKA_BROKERS: 'localhost:9092', SCHEMA_REGISTRY_URL: 'http://r:1' }],
    ['DATABASE_URL', { DATABASE_URL: 'mysql://x' }],
    ['REDIS_URL', { REDIS_URL: 'http://x' }],
    ['SERVICE_ROLE', { SERVICE_ROLE: 'everything' }],
    ['PLAN_LIMITS', { PLAN_LIMITS: '{not json' }],
    ['PLAN_LIMITS', { PLAN_LIMITS: '{}' }],
    ['PLAN_LIMITS', { PLAN_LIMITS: '[]' }],
    ['PLAN_LIMITS', { PLAN_LIMITS: '{"Free Plan":{"rps":1,"burst":1}}' }],
    ['CREDENTIALS_KEY', { CREDENTIALS_KEY: `!!junk!!${Buffer.alloc(32, 1).toString('base64')}` }],
    ['CREDENTIALS_KEY', { CREDENTIALS_KEY: `${Buffer.alloc(32, 1).toString('base64')} trailing` }],
    ['CREDENTIALS_KEY', { CREDENTIALS_KEY: Buffer.alloc(32, 1).toString('base64').replace('=', '') + '==' }],
    ['CREDENTIALS_PREVIOUS_KEYS', { CREDENTIALS_PREVIOUS_KEYS: `old:#${Buffer.alloc(32, 1).toString('base64')}` }],
    ['PUBLIC_BASE_URL', { PUBLIC_BASE_URL: 'javascript:alert(1)' }],
    ['PUBLIC_BASE_URL', { PUBLIC_BASE_URL: 'file:///etc/passwd' }],
    ['PUBLIC_BASE_URL', { PUBLIC_BASE_URL: 'https://user:pw@ingest.example.com' }],
    ['PUBLIC_BASE_URL', { PUBLIC_BASE_URL: 'https://ingest.example.com/?x=1' }],
    ['PLATFORM_API_BASE', { PLATFORM_API_BASE: 'ftp://platform.example.com' }],
    ['HOST', { HOST: 'not a host!' }],
    ['HOST', { HOST: '-bad-.example' }],
    ['PLAN_LIMITS', { PLAN_LIMITS: '{"free":{"rps":0,"burst":1}}' }],
    ['PLAN_LIMITS', { PLAN_LIMITS: '{"free":{"rps":1}}' }],
    ['PLATFORM_APP_SECRET', { PLATFORM_APP_ID: 'app' }],
    ['GATEWAY_MAX_IN_FLIGHT_BYTES', { GATEWAY_MAX_IN_FLIGHT_BYTES: '1000' }],
    ['GATEWAY_MAX_IN_FLIGHT_BYTES', { GATEWAY_MAX_IN_FLIGHT_BYTES: 'lots' }],
    ['GATEWAY_ACCEPTORS', { GATEWAY_ACCEPTORS: '-1' }],
    ['GATEWAY_ACCEPTORS', { GATEWAY_ACCEPTORS: '1000' }],
  ])('%s', (variable, env) => {
    let err: unknown;
    try {
      loadConfig(env);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const message = (err as ConfigError).message;
    expect(message).toMatch(new RegExp(`^invalid configuration: ${variable} `));
    expect(message).not.toContain('\n');
  });

  it('an empty value counts as unset', () => {
    expect(loadConfig({ PORT: '', KAFKA_BROKERS: '' }).port).toBe(8080);
  });
});
