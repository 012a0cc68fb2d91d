/** Privacy metrics (docs/privacy.md, docs/operations.md): erasures by outcome, retention by store. */
import { Counter, Gauge } from 'prom-client';
import { registry } from '../shared/metrics.js';

export const erasuresTotal = new Counter({
  name: 'privacy_erasures_total',
  help: 'Erasure jobs finished, by status (done, failed)',
  labelNames: ['status'] as const,
  registers: [registry],
});

// Both series exist from the start, so an alert on `failed` has a series to watch before the first erasure.
for (const status of ['done', 'failed']) erasuresTotal.inc({ status }, 0);

export const erasedRecords = new Counter({
  name: 'privacy_erased_records_total',
  help: 'Records removed by erasures, by store',
  labelNames: ['store'] as const,
  registers: [registry],
});

export const oldestEntryAge = new Gauge({
  name: 'privacy_oldest_entry_age_seconds',
  help: 'Age of the oldest entry of each store that holds personal or event data (0: empty), measured by the retention sweep',
  labelNames: ['store'] as const,
  registers: [registry],
});

export const retentionDeleted = new Counter({
  name: 'privacy_retention_deleted_total',
  help: 'Entries deleted by the retention sweep because they outlived their store retention, by store',
  labelNames: ['store'] as const,
  registers: [registry],
});
