/** The dead-letter record every runtime writes on events.dlq for a record a stage could not process. */
export interface DeadLetter {
  readonly stage: string;
  readonly reason: string;
  readonly error: string | null;
  readonly source_topic: string;
  readonly source_partition: number;
  readonly source_offset: string;
  readonly key: string;
  readonly value: unknown;
  readonly failed_at: number;
}
