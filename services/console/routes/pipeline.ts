/**
 * Admin API: where the pipeline stands, `GET /admin/v1/pipeline`, on either runtime. For operators (is a stage
 * behind? are dead letters piling up? is a replay running?) and for tests that wait for the pipeline to drain.
 *  - topics and consumers: offsets and lag per topic AND partition (datateam/log-positions.ts: the embedded log's
 *    tables read in one statement, or the brokers' watermarks and the groups' committed offsets on Kafka);
 *  - dead_letters: per stage, how many wait and the oldest (datateam/dead-letter-repo.ts);
 *  - replays: the replays running now, from `listRunningReplays`.
 */
import type { FastifyInstance } from 'fastify';
import type { DeadLetterRepo, StageSummary } from '../../datateam/dead-letter-repo.js';
import type { LogPositions, PositionsReader } from '../../datateam/log-positions.js';

export interface PipelineStatus extends LogPositions {
  readonly runtime: 'embedded' | 'kafka';
  readonly dead_letters: StageSummary[];
  readonly replays: unknown[];
}

export interface PipelineRouteDeps {
  readonly runtime: 'embedded' | 'kafka';
  readonly positions: PositionsReader;
  readonly deadLetters: DeadLetterRepo;
  /** The replays running now, as GET …/replays/{id} shows them. Hook for the replay jobs; default: none. */
  readonly listRunningReplays?: () => Promise<unknown[]>;
}

const partitionsOf = (props: Record<string, unknown>) => ({ type: 'array', items: { type: 'object', properties: props } }) as const;
const int = { type: 'integer' } as const;
const intOrNull = { type: ['integer', 'null'] } as const;

export function pipelineRoutes(app: FastifyInstance, deps: PipelineRouteDeps): void {
  app.get(
    '/admin/v1/pipeline',
    {
      schema: {
        description:
          'Offsets and lag per topic and partition, each stage group\'s committed offsets and lag, dead letters per stage, replays running. Embedded offsets are positions in one sequence shared by all topics: `records` and `lag` are counts.',
        response: {
          200: {
            type: 'object',
            properties: {
              runtime: { type: 'string', enum: ['embedded', 'kafka'] },
              topics: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: {
                    topic: { type: 'string' },
                    end_offset: intOrNull,
                    records: int,
                    partitions: partitionsOf({ partition: int, log_start_offset: int, end_offset: int, records: int }),
                  },
                },
              },
              consumers: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: {
                    group: { type: 'string' },
                    topic: { type: 'string' },
                    offset: intOrNull,
                    lag: int,
                    partitions: partitionsOf({ partition: int, committed_offset: intOrNull, end_offset: int, lag: int }),
                  },
                },
              },
              dead_letters: {
                type: 'array',
                items: { type: 'object', properties: { stage: { type: 'string' }, topic: { type: 'string' }, count: int, oldest: { type: ['string', 'null'] } } },
              },
              replays: { type: 'array', items: { type: 'object', additionalProperties: true } },
            },
          },
        },
      },
    },
    async (): Promise<PipelineStatus> => {
      const [positions, deadLetters, replays] = await Promise.all([
        deps.positions(),
        deps.deadLetters.summary(),
        deps.listRunningReplays?.() ?? Promise.resolve([]),
      ]);
      return { runtime: deps.runtime, ...positions, dead_letters: deadLetters, replays };
    },
  );
}
