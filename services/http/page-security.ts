/**
 * Security headers for the service's own HTML pages (problem pages, the OAuth start and callback pages):
 * @fastify/helmet registered in the calling scope only (never at the root: the JSON APIs need none of it, and
 * the console registers its own). The pages are self-contained: no scripts, inline styles only, never framed.
 */
import helmet from '@fastify/helmet';
import type { FastifyInstance } from 'fastify';

export async function registerPageSecurityHeaders(app: FastifyInstance): Promise<void> {
  await app.register(helmet, {
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'none'"],
        styleSrc: ["'unsafe-inline'"],
        imgSrc: ["'self'"],
        formAction: ["'none'"],
        frameAncestors: ["'none'"],
        baseUri: ["'none'"],
      },
    },
    xFrameOptions: { action: 'deny' },
    referrerPolicy: { policy: 'no-referrer' },
    // HSTS is the TLS terminator's call (PUBLIC_BASE_URL may be plain http in development).
    strictTransportSecurity: false,
  });
}
