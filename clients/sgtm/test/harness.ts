/**
 * Runs the template's sandboxed code the way a server-side GTM container does: in a fresh V8 context (node:vm) with
 * only `data` and `require`, where `require` hands out the container's APIs (sendHttpRequest, sha256Sync,
 * getAllEventData, makeString, logToConsole, JSON, getTimestampMillis, ...) and refuses any API the template's
 * permissions do not cover. The context has no timers, no fetch, no process and, like the sandbox, no
 * String.prototype.normalize. sendHttpRequest makes real HTTP requests (to the real service in the tests).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import vm from 'node:vm';
import ts from 'typescript';
import YAML from 'yaml';

export const TEMPLATE_PATH = join(import.meta.dirname, '..', 'template.tpl');

export const SECTIONS = [
  '___TERMS_OF_SERVICE___',
  '___INFO___',
  '___TEMPLATE_PARAMETERS___',
  '___SANDBOXED_JS_FOR_SERVER___',
  '___SERVER_PERMISSIONS___',
  '___TESTS___',
  '___NOTES___',
] as const;

/** The template's sections by name (text between a `___NAME___` line and the next). */
export function readTemplate(path = TEMPLATE_PATH): Record<string, string> {
  const out: Record<string, string> = {};
  let current: string | undefined;
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (/^___[A-Z_]+___$/.test(line)) {
      current = line;
      out[current] = '';
    } else if (current) out[current] += `${line}\n`;
  }
  for (const k of Object.keys(out)) out[k] = out[k]!.trim();
  return out;
}

/** The permission each permission-gated API needs (server-side GTM's documentation of each API). */
export const API_PERMISSIONS: Readonly<Record<string, string | null>> = {
  sendHttpRequest: 'send_http',
  getAllEventData: 'read_event_data',
  getEventData: 'read_event_data',
  logToConsole: 'logging',
  getContainerVersion: 'read_container_data',
  sha256Sync: null,
  getTimestampMillis: null,
  getType: null,
  makeInteger: null,
  makeNumber: null,
  makeString: null,
  JSON: null,
  Math: null,
  Object: null,
  Promise: null,
};

export interface HttpResponse {
  statusCode: number;
  headers: Record<string, string>;
  body: string;
}
export type Send = (url: string, options: { method?: string; headers?: Record<string, string>; timeout?: number }, body?: string) => Promise<HttpResponse>;

export interface SentRequest {
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly body: any;
  /** What the template got: a status, or the rejection reason. */
  outcome: number | string;
}

export interface RunResult {
  readonly outcome: 'success' | 'failure';
  readonly requests: SentRequest[];
  readonly logs: string[];
}

export interface RunOptions {
  readonly data: Record<string, unknown>;
  readonly eventData: Record<string, unknown>;
  readonly debugMode?: boolean;
  /** Replaces the network for some requests (fault injection); return undefined to send for real. */
  readonly intercept?: (n: number, url: string, options: Parameters<Send>[1], body?: string) => Promise<HttpResponse> | undefined;
  /** How long the tag may take to call gtmOnSuccess/gtmOnFailure. */
  readonly timeoutMs?: number;
}

/** Real HTTP, answered like the container's sendHttpRequest: {statusCode, headers, body}, or a rejection {reason}. */
export const realSend: Send = async (url, options, body) => {
  try {
    const res = await fetch(url, {
      method: options.method ?? 'GET',
      headers: options.headers,
      body,
      signal: AbortSignal.timeout(options.timeout ?? 15_000),
    });
    const headers: Record<string, string> = {};
    res.headers.forEach((v, k) => (headers[k] = v));
    return { statusCode: res.status, headers, body: await res.text() };
  } catch (err) {
    throw { reason: (err as Error).name === 'TimeoutError' ? 'timed_out' : 'failed' };
  }
};

function permittedApis(sections: Record<string, string>): Set<string> {
  const permissions = JSON.parse(sections['___SERVER_PERMISSIONS___']!) as Array<{ instance: { key: { publicId: string } } }>;
  return new Set(permissions.map((p) => p.instance.key.publicId));
}

/** The container's APIs, as `require` hands them to the sandbox. */
function containerApis(options: RunOptions, requests: SentRequest[], logs: string[]): Record<string, unknown> {
  let n = 0;
  const makeNumber = (v: unknown) => (typeof v === 'boolean' ? (v ? 1 : 0) : Number(v));
  return {
    sendHttpRequest: (url: string, opts: Parameters<Send>[1] = {}, body?: string) => {
      const req: SentRequest = { url, headers: { ...(opts.headers ?? {}) }, body: body === undefined ? undefined : JSON.parse(body), outcome: 'pending' };
      requests.push(req);
      const injected = options.intercept?.(n++, url, opts, body);
      return (injected ?? realSend(url, opts, body)).then(
        (r) => {
          req.outcome = r.statusCode;
          return r;
        },
        (e: { reason: string }) => {
          req.outcome = e.reason;
          throw e;
        },
      );
    },
    sha256Sync: (input: string, o?: { outputEncoding?: 'hex' | 'base64' }) =>
      createHash('sha256').update(String(input), 'utf8').digest(o?.outputEncoding === 'hex' ? 'hex' : 'base64url'),
    getAllEventData: () => structuredClone(options.eventData),
    getEventData: (key: string) => structuredClone(key.split('.').reduce<any>((o, k) => o?.[k], options.eventData)),
    getContainerVersion: () => ({ debugMode: options.debugMode === true, previewMode: options.debugMode === true, containerId: 'GTM-TEST', version: 'QUICK_PREVIEW', environmentName: '' }),
    getTimestampMillis: () => Date.now(),
    getType: (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v === 'function' ? 'function' : typeof v),
    logToConsole: (...args: unknown[]) => logs.push(args.map((a) => (typeof a === 'string' ? a : JSON.stringify(a))).join(' ')),
    makeString: (v: unknown) => (v === undefined || v === null ? String(v) : typeof v === 'object' ? JSON.stringify(v) : String(v)),
    makeNumber,
    makeInteger: (v: unknown) => Math.trunc(makeNumber(v)),
    // The sandbox's JSON.parse answers undefined for bad input instead of throwing.
    JSON: {
      parse: (s: string) => {
        try {
          return JSON.parse(s);
        } catch {
          return undefined;
        }
      },
      stringify: (v: unknown) => JSON.stringify(v),
    },
    Math: { abs: Math.abs, ceil: Math.ceil, floor: Math.floor, max: Math.max, min: Math.min, pow: Math.pow, round: Math.round, sqrt: Math.sqrt },
    Object: { keys: Object.keys, values: Object.values, entries: Object.entries, freeze: Object.freeze, delete: (o: any, k: string) => delete o[k] },
    Promise: {
      create: (resolver: (resolve: (v: unknown) => void, reject: (e: unknown) => void) => void) => new Promise(resolver),
      all: (ps: unknown[]) => Promise.all(ps),
    },
  };
}

/** Runs the template once with `data` (its parameters) and the event; resolves when it called gtmOnSuccess/Failure. */
export function runTemplate(options: RunOptions, sections = readTemplate()): Promise<RunResult> {
  return runSandboxed(sections['___SANDBOXED_JS_FOR_SERVER___']!, options, sections);
}

function runSandboxed(code: string, options: RunOptions, sections: Record<string, string>, extraApis: Record<string, unknown> = {}): Promise<RunResult> {
  const requests: SentRequest[] = [];
  const logs: string[] = [];
  const permitted = permittedApis(sections);
  const apis = { ...containerApis(options, requests, logs), ...extraApis };
  return new Promise<RunResult>((resolve, reject) => {
    let settled = false;
    const finish = (outcome: 'success' | 'failure') => {
      if (settled) return reject(new Error(`the tag called gtmOn${outcome === 'success' ? 'Success' : 'Failure'} after it had already finished`));
      settled = true;
      clearTimeout(timer);
      resolve({ outcome, requests, logs });
    };
    const timer = setTimeout(() => {
      if (!settled) reject(new Error(`the tag neither succeeded nor failed within ${options.timeoutMs ?? 20_000} ms; logs: ${logs.join(' | ')}`));
    }, options.timeoutMs ?? 20_000);
    const sandbox = {
      data: { ...structuredClone(options.data), gtmOnSuccess: () => finish('success'), gtmOnFailure: () => finish('failure') },
      require: (name: string) => {
        if (!(name in API_PERMISSIONS) && !(name in extraApis)) throw new Error(`require('${name}'): not a server-side API this harness knows`);
        const permission = API_PERMISSIONS[name];
        if (permission && !permitted.has(permission)) throw new Error(`require('${name}') needs the ${permission} permission`);
        return apis[name as keyof typeof apis];
      },
    };
    const context = vm.createContext(sandbox, { codeGeneration: { strings: false, wasm: false } });
    vm.runInContext('delete String.prototype.normalize;', context);
    try {
      vm.runInContext(`(function () {\n${code}\n})();`, context, { filename: 'template.tpl#sandboxed', timeout: 1000 });
    } catch (err) {
      clearTimeout(timer);
      reject(err);
    }
  });
}

/** Syntax the sandbox does not have, found in the sandboxed code (empty: none). */
export function unsupportedSyntax(code: string): string[] {
  const file = ts.createSourceFile('sandboxed.js', code, ts.ScriptTarget.ES2022, true, ts.ScriptKind.JS);
  const found: string[] = [];
  const refuse: Partial<Record<ts.SyntaxKind, string>> = {
    [ts.SyntaxKind.ArrowFunction]: 'arrow function',
    [ts.SyntaxKind.TemplateExpression]: 'template literal',
    [ts.SyntaxKind.NoSubstitutionTemplateLiteral]: 'template literal',
    [ts.SyntaxKind.RegularExpressionLiteral]: 'regular expression literal',
    [ts.SyntaxKind.NewExpression]: 'new',
    [ts.SyntaxKind.ClassDeclaration]: 'class',
    [ts.SyntaxKind.SpreadElement]: 'spread',
    [ts.SyntaxKind.SpreadAssignment]: 'spread',
    [ts.SyntaxKind.ForOfStatement]: 'for…of',
    [ts.SyntaxKind.AwaitExpression]: 'await',
    [ts.SyntaxKind.YieldExpression]: 'yield',
    [ts.SyntaxKind.ThisKeyword]: 'this',
    [ts.SyntaxKind.TypeOfExpression]: 'typeof',
    [ts.SyntaxKind.ObjectBindingPattern]: 'destructuring',
    [ts.SyntaxKind.ArrayBindingPattern]: 'destructuring',
  };
  const visit = (node: ts.Node) => {
    const what = refuse[node.kind];
    if (what) found.push(`${what} at line ${file.getLineAndCharacterOfPosition(node.getStart()).line + 1}`);
    ts.forEachChild(node, visit);
  };
  visit(file);
  if ((file as unknown as { parseDiagnostics: unknown[] }).parseDiagnostics.length > 0) found.push('syntax error');
  return found;
}

export interface ScenarioResult {
  readonly name: string;
  readonly error?: string;
}

/**
 * Runs the template's own ___TESTS___ scenarios with the container's test APIs (mock, runCode, assertApi,
 * assertThat), so the tests a user sees in the GTM UI are checked here too.
 */
export async function runTemplateTests(sections = readTemplate()): Promise<ScenarioResult[]> {
  const spec = YAML.parse(sections['___TESTS___']!) as { scenarios: Array<{ name: string; code: string }>; setup?: string };
  const results: ScenarioResult[] = [];
  for (const scenario of spec.scenarios) {
    const mocks: Record<string, unknown> = {};
    const called = new Set<string>();
    let pending: Promise<unknown> | undefined;
    const fail = (m: string) => {
      throw new Error(m);
    };
    const testApis = {
      mock: (name: string, impl: unknown) => {
        mocks[name] = typeof impl === 'function' ? impl : () => structuredClone(impl);
      },
      runCode: (data: Record<string, unknown>) => {
        const eventData = (mocks.getAllEventData as (() => Record<string, unknown>) | undefined)?.() ?? {};
        const overrides = { ...mocks };
        delete overrides.getAllEventData;
        pending = runSandboxed(sections['___SANDBOXED_JS_FOR_SERVER___']!, { data, eventData, timeoutMs: 5000 }, sections, overrides).then((r) =>
          called.add(r.outcome === 'success' ? 'gtmOnSuccess' : 'gtmOnFailure'),
        );
      },
      assertApi: (name: string) => ({
        wasCalled: () => called.has(name) || fail(`${name} was not called`),
        wasNotCalled: () => !called.has(name) || fail(`${name} was called`),
      }),
      assertThat: (actual: unknown) => ({
        isEqualTo: (expected: unknown) =>
          JSON.stringify(sortKeys(actual)) === JSON.stringify(sortKeys(expected)) || fail(`${JSON.stringify(actual)} is not ${JSON.stringify(expected)}`),
        isUndefined: () => actual === undefined || fail(`${JSON.stringify(actual)} is not undefined`),
        isDefined: () => actual !== undefined || fail('is undefined'),
      }),
    };
    // The scenario's code runs in two steps: everything up to runCode, then (once the tag finished) the assertions.
    const [before, after] = splitAtRunCode(scenario.code);
    const context = vm.createContext({
      ...testApis,
      require: (name: string) => containerApis({ data: {}, eventData: {} }, [], [])[name as 'JSON'],
    });
    try {
      vm.runInContext(`${spec.setup ?? ''}\n${before}\nglobalThis.__after = function () {\n${after}\n};`, context, { timeout: 1000 });
      if (!pending) throw new Error('the scenario never called runCode');
      await pending;
      // The mocked sendHttpRequest resolved through promise callbacks: let them run before asserting.
      await new Promise((r) => setImmediate(r));
      vm.runInContext('__after();', context, { timeout: 1000 });
      results.push({ name: scenario.name });
    } catch (err) {
      results.push({ name: scenario.name, error: (err as Error).message });
    }
  }
  return results;
}

function splitAtRunCode(code: string): [string, string] {
  const lines = code.split('\n');
  const i = lines.findIndex((l) => /^\s*runCode\(/.test(l));
  if (i < 0) return [code, ''];
  return [lines.slice(0, i + 1).join('\n'), lines.slice(i + 1).join('\n')];
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]));
  return v;
}
