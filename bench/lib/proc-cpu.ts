/**
 * CPU time of processes from /proc (Linux): what a process, Postgres (the postmaster and its backends) or the broker
 * spent, read while it runs, so a benchmark can cut a run into windows.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';

let ticks: number | undefined;
/** Clock ticks per second of /proc's times (getconf CLK_TCK; 100 on Linux). */
function clockTicks(): number {
  ticks ??= Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
  return ticks;
}

/** Fields of /proc/<pid>/stat after the command name (which may hold spaces), or undefined when the process is gone. */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** utime + stime of a process (its threads included) in seconds; with `children`, also of its reaped children. */
export function processCpuSec(pid: number, children = false): number {
  const f = statFields(pid);
  if (!f) return 0;
  // After the name: state is field 3 of stat, so utime (14) .. cstime (17) are at 11..14 here.
  const own = Number(f[11]) + Number(f[12]);
  return (children ? own + Number(f[13]) + Number(f[14]) : own) / clockTicks();
}

/** The pid in the first line of a pid file (Kafka's kafka.pid, Postgres's postmaster.pid), if the file is there. */
export function pidFromFile(file: string): number | undefined {
  if (!existsSync(file)) return undefined;
  const pid = Number(readFileSync(file, 'utf8').split('\n')[0]!.trim());
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/**
 * A reader of a Postgres server's CPU seconds so far: the postmaster with its reaped backends plus the live ones
 * (its children), so a backend that exits between two reads is counted once. Without a postmaster pid (Postgres not
 * started by infra/local) every process named `postgres` is summed, which includes other servers of the machine.
 */
export function postgresCpuReader(postmasterPid: number | undefined): () => number {
  if (postmasterPid === undefined || !existsSync(`/proc/${postmasterPid}/task/${postmasterPid}/children`)) {
    return () => {
      let sec = 0;
      for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
        try {
          if (readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('postgres')) sec += processCpuSec(Number(pid));
        } catch {
          // gone meanwhile
        }
      }
      return sec;
    };
  }
  return () => {
    let sec = processCpuSec(postmasterPid, true);
    let children = '';
    try {
      children = readFileSync(`/proc/${postmasterPid}/task/${postmasterPid}/children`, 'utf8').trim();
    } catch {
      return sec;
    }
    for (const pid of children.split(' ').filter(Boolean)) sec += processCpuSec(Number(pid));
    return sec;
  };
}
