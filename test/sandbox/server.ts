import type { AddressInfo } from 'node:net';
import { buildSandbox, type SandboxApp } from './app.js';
import { API_PREFIX, AUTHORIZE_PATH } from './codes.js';
import type { SandboxOptions } from './state.js';

export interface StartSandboxOptions extends SandboxOptions {
  /** 0 (default) picks a free port. */
  port?: number;
  /** Default 127.0.0.1: the control API has no authentication, keep it on loopback. */
  host?: string;
}

export interface RunningSandbox {
  /** e.g. http://127.0.0.1:9900 */
  url: string;
  /** `${url}/open_api/v1.3` */
  apiBase: string;
  /** `${url}/portal/auth` */
  authUrl: string;
  /** `${url}/_control` */
  controlUrl: string;
  app: SandboxApp;
  close(): Promise<void>;
}

export async function startSandbox(opts: StartSandboxOptions = {}): Promise<RunningSandbox> {
  const { port = 0, host = '127.0.0.1', ...appOpts } = opts;
  const app = buildSandbox(appOpts);
  await app.listen({ port, host });
  const address = app.server.address() as AddressInfo;
  const hostPart = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${hostPart}:${address.port}`;
  let closing: Promise<void> | null = null;
  return {
    url,
    apiBase: `${url}${API_PREFIX}`,
    authUrl: `${url}${AUTHORIZE_PATH}`,
    controlUrl: `${url}/_control`,
    app,
    close() {
      closing ??= app.close().then(() => undefined);
      return closing;
    },
  };
}
