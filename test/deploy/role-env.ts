/**
 * What a deployment manifest (the Compose file, the Helm chart) must give each role's process: only variables the
 * service knows (services/shared/config.ts), a configuration loadConfig accepts, and what a multi-process Kafka
 * deployment cannot do without (the runtime's three addresses, the role, and the shared secrets that a process
 * would otherwise generate for itself: every replica would then have another admin token and credentials key).
 */
import { KNOWN_VARIABLES, loadConfig, SERVICE_ROLES } from '../../services/shared/config.js';

/** Roles of a deployment: every SERVICE_ROLE but `all`. */
export const DEPLOYED_ROLES = SERVICE_ROLES.filter((r) => r !== 'all');

/** Variables without which a role's process does not belong in a multi-process deployment. */
export const REQUIRED_IN_DEPLOYMENT = ['SERVICE_ROLE', 'KAFKA_BROKERS', 'SCHEMA_REGISTRY_URL', 'DATABASE_URL', 'ADMIN_TOKEN', 'CREDENTIALS_KEY'] as const;

/** Problems of one role's environment, as sentences; empty when it is right. */
export function roleEnvProblems(role: string, env: Readonly<Record<string, string>>): string[] {
  const problems: string[] = [];
  const known = new Set(KNOWN_VARIABLES);
  for (const name of Object.keys(env)) if (!known.has(name)) problems.push(`${role}: sets ${name}, which the service does not read`);
  for (const name of REQUIRED_IN_DEPLOYMENT) if (!env[name]) problems.push(`${role}: does not set ${name}`);
  if (env.SERVICE_ROLE !== undefined && env.SERVICE_ROLE !== role) problems.push(`${role}: SERVICE_ROLE is ${env.SERVICE_ROLE}`);
  try {
    loadConfig(env);
  } catch (err) {
    problems.push(`${role}: ${(err as Error).message}`);
  }
  return problems;
}
