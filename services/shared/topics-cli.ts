/** Prints one line per topic: `name partitions key=value,...` (used by infra/local scripts to create topics). */
import { TOPIC_SPECS } from './topics.js';

for (const t of TOPIC_SPECS) {
  const cfg = Object.entries(t.config).map(([k, v]) => `${k}=${v}`).join(',');
  process.stdout.write(`${t.name} ${t.partitions} ${cfg}\n`);
}
