/** Arguments of the command-line tools that take none: `--help` prints the usage, anything else is exit 2. */
import { parseArgs } from 'node:util';

export function takeNoArguments(usage: string, argv: string[] = process.argv.slice(2)): void {
  let help: boolean | undefined;
  try {
    help = parseArgs({ args: argv, options: { help: { type: 'boolean', short: 'h' } }, allowPositionals: false, strict: true }).values.help;
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${usage}\n`);
    process.exit(2);
  }
  if (help) {
    process.stdout.write(`${usage}\n`);
    process.exit(0);
  }
}
