// Two commands at once, their output kept apart: `npm test` (scripts/test.ts) runs the system
// tier beside the unit and integration tiers this way.
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Writable } from 'node:stream';

export interface Command {
  /** What the summary calls it ("system"). */
  name: string;
  file: string;
  args: string[];
  /** Variables of its own, over `opts.env`. */
  env?: NodeJS.ProcessEnv;
}

export interface Outcome {
  name: string;
  /** The process's exit status; 1 when a signal ended it. */
  code: number;
  /** vitest's own count line ("Tests  766 passed (766)") without the label, when it printed one. */
  tests: string | undefined;
}

// ANSI colour codes, removed before a line is matched.
const ANSI = /\u001b\[[0-9;]*m/g;

function exitOf(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    child.on('close', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

/**
 * Runs `live` and `held` together. `live`'s lines (stdout and stderr) go to `out` as they come;
 * `held`'s are kept and written whole, framed, as soon as it has ended (lines are written whole,
 * so the block never splits one of `live`'s). Resolves with both outcomes once both have ended.
 */
export async function runBeside(
  live: Command,
  held: Command,
  opts: {
    cwd: string;
    env: NodeJS.ProcessEnv;
    out: Writable;
    /** Where SIGINT and SIGTERM arrive (default: this process). */
    signals?: Pick<NodeJS.Process, 'on' | 'off'>;
  },
): Promise<[Outcome, Outcome]> {
  const start = (c: Command) =>
    spawn(c.file, c.args, {
      cwd: opts.cwd,
      env: { ...opts.env, ...c.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  const liveChild = start(live);
  const heldChild = start(held);
  // Ctrl-C or a stop reaches both (a terminal signals the whole group anyway); this process stays
  // to print what they wrote as they stop, and to give their exit statuses.
  const forward = (signal: NodeJS.Signals) => {
    for (const c of [liveChild, heldChild]) if (c.exitCode === null) c.kill(signal);
  };
  const signals = opts.signals ?? process;
  signals.on('SIGINT', forward);
  signals.on('SIGTERM', forward);
  const counts = new Map<string, string>();
  const note = (name: string, line: string) => {
    const m = /^\s*Tests\s+(.+)$/.exec(line.replace(ANSI, ''));
    if (m?.[1]) counts.set(name, m[1].trim());
  };

  let kept: string[] | undefined = [];
  const flush = () => {
    if (!kept) return;
    opts.out.write(`\n──── ${held.name} (ran beside ${live.name}) ────\n`);
    for (const l of kept) opts.out.write(`${l}\n`);
    opts.out.write(`──── end of ${held.name} ────\n\n`);
    kept = undefined;
  };
  const lines = (child: ChildProcess) =>
    [child.stdout, child.stderr].map(
      (s) =>
        new Promise<void>((resolve) => {
          if (!s) return resolve();
          createInterface({ input: s }).on('line', (l) => {
            if (child === liveChild) {
              note(live.name, l);
              opts.out.write(`${l}\n`);
            } else {
              note(held.name, l);
              if (kept) kept.push(l);
              else opts.out.write(`${l}\n`);
            }
          });
          s.on('close', () => resolve());
        }),
    );
  const liveRead = Promise.all(lines(liveChild));
  const heldRead = Promise.all(lines(heldChild));
  const codes = Promise.all([
    exitOf(liveChild).then(async (code) => {
      await liveRead;
      return code;
    }),
    exitOf(heldChild).then(async (code) => {
      await heldRead;
      flush();
      return code;
    }),
  ]);
  const [liveCode, heldCode] = await codes.finally(() => {
    signals.off('SIGINT', forward);
    signals.off('SIGTERM', forward);
  });
  return [
    { name: live.name, code: liveCode, tests: counts.get(live.name) },
    { name: held.name, code: heldCode, tests: counts.get(held.name) },
  ];
}

/** The figures of a vitest count line ("1 failed | 765 passed | 1 skipped (767)"); absent ones are 0. */
export function countsOf(tests: string | undefined): { passed: number; failed: number; skipped: number } {
  const n = (word: string) => Number(new RegExp(`(\\d+) ${word}`).exec(tests ?? '')?.[1] ?? 0);
  return { passed: n('passed'), failed: n('failed'), skipped: n('skipped') + n('todo') };
}
