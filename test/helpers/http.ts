/**
 * HTTP as a plain client on a slower link sends it: a POST whose body goes out in 256 KiB pieces (5 ms apart) while
 * the server may already have answered, then the answer read to its end. The oversized-body tests use it to show
 * that a 413 reaches a client still writing.
 */
import { request } from 'node:http';

export interface PlainAnswer {
  readonly status: number;
  readonly headers: Record<string, unknown>;
  readonly body: string;
}

export function postInPieces(url: string, headers: Record<string, string>, body: Buffer): Promise<PlainAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers: { ...headers, 'content-length': String(body.length) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    void (async () => {
      for (let at = 0; at < body.length && !req.destroyed; at += 256 * 1024) {
        if (!req.write(body.subarray(at, at + 256 * 1024))) await new Promise((r) => req.once('drain', r));
        // The pace is what is under test: a client on a slow link, still writing when the answer comes.
        await new Promise((r) => setTimeout(r, 5));
      }
      req.end();
    })().catch(reject);
  });
}
