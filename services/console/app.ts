/** The console: the admin API (workspaces, keys, members, forwarding setup, the platform connection). */
import type { FastifyInstance } from 'fastify';
import type { Db } from '../shared/db/db.js';
import { registerAdminAuth } from './admin-auth.js';
import { workspaceRoutes } from './routes/workspaces.js';
import { describeSchemaErrors } from './schema-errors.js';
import { UserRepo } from './user-repo.js';
import { WorkspaceRepo } from './workspace-repo.js';

export interface ConsoleDeps {
  readonly db: Db;
  readonly adminToken: string;
  readonly plans: readonly string[];
}

/** Admin routes, in their own scope so the admin token hook covers exactly them. */
export async function adminPlugin(app: FastifyInstance, deps: ConsoleDeps): Promise<void> {
  registerAdminAuth(app, deps.adminToken);
  app.setSchemaErrorFormatter(describeSchemaErrors);
  workspaceRoutes(app, { repo: new WorkspaceRepo(deps.db), users: new UserRepo(deps.db), plans: deps.plans });
}
