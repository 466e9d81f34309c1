import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * Runs one contestant as a child process and measures it from outside: wall time, the child's
 * CPU and peak RSS (GNU time's rusage when present, else polling /proc/PID/status VmHWM), and the
 * CPU the local PostgreSQL server spent meanwhile (its processes' utime+stime, plus what the
 * postmaster reaped from backends that exited), so a table can say where the time went.
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
const TICK = 100; // USER_HZ, 100 on every Linux this runs on

function machineBusyTicks(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal ...: everything but idle and iowait
  return f.reduce((a, b) => a + b, 0) - (f[3] ?? 0) - (f[4] ?? 0);
}

/** utime+stime of every postgres process, plus the postmaster's reaped children's. */
function postgresTicks(): number | null {
  let total = 0;
  let seen = false;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue;
    }
    const close = stat.lastIndexOf(')');
    const comm = stat.slice(stat.indexOf('(') + 1, close);
    if (comm !== 'postgres') continue;
    seen = true;
    const f = stat.slice(close + 2).split(' ');
    // fields after comm: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
    total += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
  }
  return seen ? total : null;
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
  const pg0 = postgresTicks();
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
  const poll = useTime
    ? null
    : setInterval(() => {
        try {
          const m = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
          if (m) hwmKb = Math.max(hwmKb, Number(m[1]));
        } catch {}
      }, 50);
  const code = await new Promise<number | null>((resolve) => {
    child.on('close', (c) => resolve(c));
    child.on('error', (e) => {
      err += String(e);
      resolve(null);
    });
  });
  if (poll) clearInterval(poll);
  const wallS = (performance.now() - t0) / 1000;
  // Backends exit just after their client; give the postmaster a moment to reap them.
  await new Promise((r) => setTimeout(r, 300));
  const pg1 = postgresTicks();
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
    pgCpuS: pg0 !== null && pg1 !== null ? (pg1 - pg0) / TICK : null,
    machineCpuS: (m1 - m0) / TICK,
  };
}
