/**
 * What the command-line tools share: the admin API over HTTP (`--url`, `ADMIN_TOKEN`), the exit codes a script can
 * rely on, and the progress bar (cli-progress, on stderr and only on a terminal, so stdout stays data).
 */
import { once } from 'node:events';
import cliProgress from 'cli-progress';

/** Exit codes of the data-team commands (README, "For data teams"). */
export const Exit = {
  ok: 0,
  /** The operation ran and did not succeed: a replay failed or was cancelled, letters failed to redrive. */
  failed: 1,
  /** Bad command line: nothing was asked of the service. */
  usage: 2,
  /** The service refused the request as invalid (400, 409, 422 …). */
  refused: 3,
  /** The workspace, letter or replay does not exist (404). */
  notFound: 4,
  /** ADMIN_TOKEN missing or wrong (401). */
  unauthorized: 5,
  /** The service could not be reached, or failed (5xx), or broke off a stream. */
  unavailable: 6,
} as const;

export class CliError extends Error {
  constructor(
    message: string,
    readonly code: number,
  ) {
    super(message);
  }
}

export const usageError = (message: string): CliError => new CliError(message, Exit.usage);

export interface AdminHttp {
  readonly baseUrl: string;
  /** JSON call; throws CliError (with the problem's detail) on any answer but 2xx. */
  json<T = any>(method: string, path: string, body?: unknown): Promise<T>;
  /** A streamed answer (NDJSON); throws CliError on any answer but 200. */
  stream(path: string): Promise<Response>;
}

export function adminHttp(url: string | undefined, token: string | undefined): AdminHttp {
  const baseUrl = (url ?? `http://localhost:${process.env.PORT ?? '8080'}`).replace(/\/+$/, '');
  if (!/^https?:\/\/[^/]+/.test(baseUrl)) throw usageError(`--url: "${baseUrl}" is not an http(s) URL`);
  if (!token) throw new CliError('set ADMIN_TOKEN to the service\'s admin token (printed once at start when unset there)', Exit.unauthorized);
  const call = async (method: string, path: string, body?: unknown): Promise<Response> => {
    try {
      return await fetch(`${baseUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      throw new CliError(`cannot reach ${baseUrl}: ${(err as Error & { cause?: Error }).cause?.message ?? (err as Error).message}`, Exit.unavailable);
    }
  };
  return {
    baseUrl,
    async json(method, path, body) {
      const r = await call(method, path, body);
      if (!r.ok) throw await failure(r, `${method} ${path}`);
      const text = await r.text();
      return text ? JSON.parse(text) : undefined;
    },
    async stream(path) {
      const r = await call('GET', path);
      if (r.status !== 200) throw await failure(r, `GET ${path}`);
      return r;
    },
  };
}

/** The CliError of a non-2xx answer: its exit code by status, its message from the problem document. */
async function failure(r: Response, what: string): Promise<CliError> {
  const text = await r.text().catch(() => '');
  let detail = text.slice(0, 500);
  try {
    const p = JSON.parse(text) as { detail?: string; title?: string };
    detail = p.detail ?? p.title ?? detail;
  } catch {
    // not a problem document
  }
  const code =
    r.status === 401 ? Exit.unauthorized : r.status === 404 ? Exit.notFound : r.status >= 500 ? Exit.unavailable : Exit.refused;
  return new CliError(`${what}: ${r.status} ${detail}`, code);
}

/** A progress bar with ETA on stderr (nothing when stderr is not a terminal). `total` is in the caller's units. */
export function progressBar(label: string, total: number, extra = '', payload: Record<string, unknown> = {}): cliProgress.SingleBar {
  const bar = new cliProgress.SingleBar(
    {
      format: `${label} [{bar}] {percentage}% | ETA {eta_formatted} | ${extra}`,
      stream: process.stderr,
      hideCursor: true,
      etaBuffer: 50,
      fps: 5,
    },
    cliProgress.Presets.shades_classic,
  );
  bar.start(total, 0, payload);
  return bar;
}

/** Reads an NDJSON response line by line (constant memory). */
export async function* ndjsonLines(r: Response): AsyncGenerator<string> {
  if (!r.body) return;
  const decoder = new TextDecoder();
  let rest = '';
  try {
    for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>) {
      rest += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = rest.indexOf('\n')) >= 0) {
        yield rest.slice(0, nl);
        rest = rest.slice(nl + 1);
      }
    }
  } catch (err) {
    throw new CliError(`the service broke off the stream: ${(err as Error).message}`, Exit.unavailable);
  }
  if (rest.length > 0) yield rest;
}

/** Writes a line to the output, waiting when it is full (backpressure all the way to the service). */
export async function writeLine(stream: NodeJS.WritableStream, line: string): Promise<void> {
  if (!stream.write(`${line}\n`)) await once(stream, 'drain');
}

/** The `decode` command through the service (GET /admin/v1/topics/{topic}/records): works on either runtime. */
export async function decodeOverHttp(http: AdminHttp, topic: string, opts: { last?: bigint; fromBeginning: boolean; keyPrefix: string }): Promise<number> {
  const q = new URLSearchParams();
  if (!opts.fromBeginning) q.set('last', String(opts.last ?? 10n));
  if (opts.keyPrefix) q.set('key_prefix', opts.keyPrefix);
  const r = await http.stream(`/admin/v1/topics/${encodeURIComponent(topic)}/records?${q}`);
  for await (const line of ndjsonLines(r)) if (line !== '') await writeLine(process.stdout, line);
  return Exit.ok;
}

