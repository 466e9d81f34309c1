import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * Runs one contestant as a child process and measures it from outside: wall time, the child's
 * CPU and peak RSS (GNU time's rusage when present, else polling /proc/PID/status VmHWM), and the
 * CPU the local PostgreSQL server spent meanwhile (its processes' utime+stime, sampled every
 * 200 ms), so a table can say where the time went.
 */

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
  wallS: number;
  /** Child (and its waited-for descendants) CPU seconds; null when not measurable. */
  cpuS: number | null;
  peakRssMb: number | null;
  /** CPU seconds of local `postgres` processes during the run; null when not visible. */
  pgCpuS: number | null;
  /** CPU seconds of the whole machine during the run (all cores). */
  machineCpuS: number;
}

const GNU_TIME = '/usr/bin/time';
export const TICK = 100; // USER_HZ, 100 on every Linux this runs on

function machineBusyTicks(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal ...: everything but idle and iowait
  return f.reduce((a, b) => a + b, 0) - (f[3] ?? 0) - (f[4] ?? 0);
}

/** utime+stime of every live `postgres` process, by pid; null when none is visible. */
function postgresTicks(): Map<number, number> | null {
  const out = new Map<number, number>();
  for (const [pid, p] of postgresProcesses()) out.set(pid, p.ticks);
  return out.size > 0 ? out : null;
}

/** Every live `postgres` process: its parent's pid and its utime+stime (in ticks of 1/100 s). */
export function postgresProcesses(): Map<number, { ppid: number; ticks: number }> {
  const out = new Map<number, { ppid: number; ticks: number }>();
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue;
    }
    const close = stat.lastIndexOf(')');
    if (stat.slice(stat.indexOf('(') + 1, close) !== 'postgres') continue;
    const f = stat.slice(close + 2).split(' ');
    // fields after comm: state(0) ppid(1) ... utime(11) stime(12)
    out.set(Number(pid), { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]) });
  }
  return out;
}

/**
 * Server CPU over a run, sampled: backends come and go with the client's connections, and a
 * backend's time reaches the postmaster's cutime only once reaped, so each pid's last seen value
 * counts (at most one sampling interval of a backend's life is lost).
 */
class PostgresCpu {
  private readonly start: Map<number, number>;
  private readonly last = new Map<number, number>();
  readonly visible: boolean;
  constructor() {
    const t = postgresTicks();
    this.visible = t !== null;
    this.start = t ?? new Map();
  }
  sample(): void {
    for (const [pid, ticks] of postgresTicks() ?? []) this.last.set(pid, ticks);
  }
  seconds(): number | null {
    if (!this.visible) return null;
    let total = 0;
    for (const [pid, ticks] of this.last) total += ticks - (this.start.get(pid) ?? 0);
    return total / TICK;
  }
}

export function hasGnuTime(): boolean {
  return existsSync(GNU_TIME);
}

export async function measure(
  cmd: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {},
): Promise<RunResult> {
  const useTime = hasGnuTime();
  const timeFile = path.join(os.tmpdir(), `bench-time-${process.pid}-${Date.now()}.txt`);
  const argv = useTime ? ['-f', '%e %U %S %M', '-o', timeFile, cmd, ...args] : args;
  const exe = useTime ? GNU_TIME : cmd;
  const pgCpu = new PostgresCpu();
  const m0 = machineBusyTicks();
  const t0 = performance.now();
  const child = spawn(exe, argv, {
    env: opts.env ?? process.env,
    cwd: opts.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out: Buffer[] = [];
  let err = '';
  child.stdout.on('data', (b: Buffer) => out.push(b));
  child.stderr.on('data', (b: Buffer) => {
    err += b.toString('utf8');
    if (err.length > 20_000) err = err.slice(-10_000);
  });
  // Without GNU time: VmHWM is the peak, so the last value read before exit is close to it.
  let hwmKb = 0;
  let tick = 0;
  const poll = setInterval(() => {
    if (!useTime) {
      try {
        const m = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
        if (m) hwmKb = Math.max(hwmKb, Number(m[1]));
      } catch {}
    }
    if (++tick % 4 === 0) pgCpu.sample();
  }, 50);
  const code = await new Promise<number | null>((resolve) => {
    child.on('close', (c) => resolve(c));
    child.on('error', (e) => {
      err += String(e);
      resolve(null);
    });
  });
  clearInterval(poll);
  const wallS = (performance.now() - t0) / 1000;
  pgCpu.sample();
  const m1 = machineBusyTicks();

  let cpuS: number | null = null;
  let peakRssMb: number | null = hwmKb ? hwmKb / 1024 : null;
  if (useTime) {
    try {
      const lines = readFileSync(timeFile, 'utf8').trim().split('\n');
      const last = lines[lines.length - 1]!.trim().split(/\s+/).map(Number);
      cpuS = (last[1] ?? 0) + (last[2] ?? 0);
      peakRssMb = (last[3] ?? 0) / 1024;
      // GNU time puts "Command exited with non-zero status N" before the numbers.
    } catch {}
    rmSync(timeFile, { force: true });
  }
  return {
    code,
    stdout: Buffer.concat(out).toString('utf8'),
    stderr: err,
    wallS,
    cpuS,
    peakRssMb,
    pgCpuS: pgCpu.seconds(),
    machineCpuS: (m1 - m0) / TICK,
  };
}
