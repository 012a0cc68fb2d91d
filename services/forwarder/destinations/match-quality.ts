/**
 * Match quality: how well a platform can tie one conversion to a person, scored 0–10 from the match keys its
 * payload carries, before it is sent. Each kind names its keys and their weights next to itself (tiktok.ts,
 * meta.ts, google.ts; README "Deliveries"); the weights of a kind add up to 10.
 */

/** Weight of each match key a kind's payload may carry. */
export type MatchWeights = Readonly<Record<string, number>>;

export interface MatchScore {
  /** The keys present, in the order of the kind's weights. */
  readonly keys: string[];
  /** 0–10, one decimal. */
  readonly quality: number;
}

/** The score of the keys present under a kind's weights. */
export function scoreMatch(present: ReadonlySet<string>, weights: MatchWeights): MatchScore {
  const keys = Object.keys(weights).filter((k) => present.has(k));
  const total = keys.reduce((sum, k) => sum + weights[k]!, 0);
  return { keys, quality: Math.round(Math.min(10, total) * 10) / 10 };
}

/** The keys whose value is a non-empty string or a non-empty list. */
export function presentKeys(values: Readonly<Record<string, unknown>>): Set<string> {
  const out = new Set<string>();
  for (const [k, v] of Object.entries(values)) {
    if ((typeof v === 'string' && v !== '') || (Array.isArray(v) && v.length > 0)) out.add(k);
  }
  return out;
}
