/**
 * The baseline of the gateway benchmarks: a bare Fastify server (the same Fastify, body limit and JSON parser as the
 * service) that parses the same body and answers 202 without doing anything else: no auth, no validation, no log.
 * `node dist/bench/baseline-server.js` prints one JSON line `{"url": …}` when it listens; SIGTERM stops it.
 */
import Fastify from 'fastify';

const app = Fastify({ logger: false, bodyLimit: 1024 * 1024 });
app.post('/v1/events', async (request, reply) => {
  const events = request.body as unknown[];
  return reply.code(202).send({ status: 'accepted', accepted: events.length });
});

await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' });
const addr = app.server.address();
const port = typeof addr === 'object' && addr ? addr.port : 0;
process.stdout.write(`${JSON.stringify({ service: 'baseline', url: `http://127.0.0.1:${port}` })}\n`);
const stop = (): void => void app.close().then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
