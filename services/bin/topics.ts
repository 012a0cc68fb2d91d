/** Prints one line per topic: `name partitions key=value;key=value` (used by infra/local scripts to create topics). */
import { TOPIC_SPECS } from '../shared/topics.js';
import { takeNoArguments } from './cli/args.js';

takeNoArguments('usage: node dist/services/bin/topics.js   (prints `name partitions key=value;…` per topic)');

for (const t of TOPIC_SPECS) {
  // ';' between configs: a value may hold commas (cleanup.policy=compact,delete).
  const cfg = Object.entries(t.config).map(([k, v]) => `${k}=${v}`).join(';');
  process.stdout.write(`${t.name} ${t.partitions} ${cfg}\n`);
}
