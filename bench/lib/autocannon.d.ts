// autocannon ships no types; the bench uses a small part of its programmatic API (see load-worker.ts).
declare module 'autocannon' {
  const autocannon: (opts: Record<string, unknown>) => Promise<Record<string, unknown>> & {
    on(event: string, listener: (...args: any[]) => void): void;
  };
  export default autocannon;
}
