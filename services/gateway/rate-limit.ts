/**
 * Per-workspace rate limits by plan: a sustained rate plus a burst allowance (rate-limiter-flexible's
 * BurstyRateLimiter, which behaves as a token bucket of `burst` tokens refilled at `rps`). In-process by default;
 * shared across gateway replicas through Redis when REDIS_URL is set, falling back to in-process limits while
 * Redis is unreachable so ingestion never stops on a limiter outage.
 */
import { Redis as IORedis, type Redis } from 'ioredis';
import {
  BurstyRateLimiter,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
  type RateLimiterAbstract,
} from 'rate-limiter-flexible';
import type { PlanLimit } from '../shared/config.js';

export interface RateDecision {
  readonly allowed: boolean;
  readonly limit: number;
  readonly remaining: number;
  /** Seconds until the window resets (and, when refused, until a retry can succeed). */
  readonly resetSeconds: number;
  /** `RateLimit-Policy` value, e.g. `10;w=1;burst=20`. */
  readonly policy: string;
}

export class WorkspaceRateLimiter {
  private readonly limiters = new Map<string, BurstyRateLimiter>();

  constructor(
    private readonly plans: Readonly<Record<string, PlanLimit>>,
    private readonly redis?: Redis,
  ) {}

  private limiterFor(plan: string): { limiter: BurstyRateLimiter; limit: PlanLimit } | undefined {
    const limit = this.plans[plan];
    if (!limit) return undefined;
    let limiter = this.limiters.get(plan);
    if (!limiter) {
      // The burst pool refills over burst/rps seconds: together a bucket of rps+burst that refills at rps.
      const burstWindow = Math.max(1, Math.ceil(limit.burst / limit.rps));
      const make = (prefix: string, points: number, duration: number): RateLimiterAbstract =>
        this.redis
          ? new RateLimiterRedis({
              storeClient: this.redis,
              keyPrefix: `rl:${plan}:${prefix}`,
              points,
              duration,
              insuranceLimiter: new RateLimiterMemory({ keyPrefix: `rl-ins:${plan}:${prefix}`, points, duration }),
            })
          : new RateLimiterMemory({ keyPrefix: `rl:${plan}:${prefix}`, points, duration });
      limiter = new BurstyRateLimiter(
        make('rate', Math.max(1, Math.floor(limit.rps)), 1) as RateLimiterMemory,
        make('burst', limit.burst, burstWindow) as RateLimiterMemory,
      );
      this.limiters.set(plan, limiter);
    }
    return { limiter, limit };
  }

  async consume(workspaceId: string, plan: string): Promise<RateDecision> {
    const found = this.limiterFor(plan) ?? this.limiterFor('free');
    if (!found) return { allowed: true, limit: 0, remaining: 0, resetSeconds: 0, policy: '' };
    const { limiter, limit } = found;
    // RateLimit-Limit is the sustained rate; the burst allowance is stated in RateLimit-Policy.
    const total = Math.floor(limit.rps);
    const policy = `${Math.floor(limit.rps)};w=1;burst=${limit.burst}`;
    try {
      const res = await limiter.consume(workspaceId, 1);
      return {
        allowed: true,
        limit: total,
        remaining: Math.max(0, res.remainingPoints),
        resetSeconds: Math.max(1, Math.ceil(res.msBeforeNext / 1000)),
        policy,
      };
    } catch (err) {
      if (err instanceof RateLimiterRes) {
        return { allowed: false, limit: total, remaining: 0, resetSeconds: Math.max(1, Math.ceil(err.msBeforeNext / 1000)), policy };
      }
      // Both Redis and its insurance failed: let the request through rather than refuse good traffic.
      return { allowed: true, limit: total, remaining: 0, resetSeconds: 1, policy };
    }
  }
}

/**
 * The limiter for a process: Redis-backed when REDIS_URL is set (offline queue off: a command fails fast and the
 * in-process insurance limiter decides). Waits up to `connectTimeoutMs` for Redis at start, then goes on anyway.
 */
export async function createRateLimiter(
  opts: { planLimits: Readonly<Record<string, PlanLimit>>; redisUrl: string | undefined },
  onRedisError: (message: string) => void,
  connectTimeoutMs = 2_000,
): Promise<{ limiter: WorkspaceRateLimiter; close(): void }> {
  if (!opts.redisUrl) return { limiter: new WorkspaceRateLimiter(opts.planLimits), close: () => undefined };
  const redis = new IORedis(opts.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
  let reported = false;
  redis.on('error', (err: Error) => {
    // One line per outage, not one per reconnect attempt.
    if (!reported) onRedisError(err.message);
    reported = true;
  });
  redis.on('ready', () => (reported = false));
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, connectTimeoutMs);
    redis.once('ready', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  return { limiter: new WorkspaceRateLimiter(opts.planLimits, redis), close: () => redis.disconnect() };
}
