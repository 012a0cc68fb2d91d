import { startSandbox } from './server.js';

/** CLI entry: `node dist/test/sandbox/main.js`. The only module of the sandbox that reads env. */
async function main(): Promise<void> {
  const port = Number(process.env.SANDBOX_PORT ?? 9900);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new Error(`SANDBOX_PORT must be a port number, got ${process.env.SANDBOX_PORT}`);
  }
  const sandbox = await startSandbox({
    port,
    host: process.env.SANDBOX_HOST ?? '127.0.0.1',
    appId: process.env.SANDBOX_APP_ID || undefined,
    appSecret: process.env.SANDBOX_APP_SECRET || undefined,
    timezone: process.env.SANDBOX_TIMEZONE || undefined,
    logger: process.env.SANDBOX_LOG === '1',
  });
  const { app } = sandbox;
  process.stdout.write(
    `${JSON.stringify({
      service: 'platform-sandbox',
      url: sandbox.url,
      apiBase: sandbox.apiBase,
      authUrl: sandbox.authUrl,
      controlUrl: sandbox.controlUrl,
      appId: app.sandbox.appId,
    })}\n`,
  );
  const shutdown = (signal: string) => {
    sandbox.close().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`platform-sandbox: close after ${signal} failed: ${String(err)}\n`);
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}

main().catch((err: unknown) => {
  process.stderr.write(`platform-sandbox: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  process.exit(1);
});
