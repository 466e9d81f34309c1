import { execFileSync } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { type Command, countsOf, runBeside } from '../../scripts/lib/beside.ts';

/**
 * `npm test` runs the system tier beside the unit and integration tiers (scripts/test.ts): two
 * vitest processes, the first's output streamed, the second's held and printed whole. Here the
 * two are small node scripts that print like vitest.
 */
const root = path.resolve(import.meta.dirname, '..', '..');

function node(name: string, script: string): Command {
  return { name, file: process.execPath, args: ['-e', script] };
}

/**
 * Runs the two, collecting what they print. `when(text, line)` is called on each whole line the
 * runner writes, so a test can let a script go on at a given point (by creating a file it waits for).
 */
async function beside(live: Command, held: Command, when: (line: string) => void = () => {}) {
  let text = '';
  const out = new Writable({
    write(chunk, _enc, done) {
      text += String(chunk);
      for (const l of String(chunk).split('\n')) when(l);
      done();
    },
  });
  const outcomes = await runBeside(live, held, { cwd: root, env: process.env, out });
  return { outcomes, lines: text.split('\n') };
}

/** A stream that keeps what is written to it. */
function collect(): { out: Writable; text: () => string } {
  let text = '';
  const out = new Writable({
    write(chunk, _enc, done) {
      text += String(chunk);
      done();
    },
  });
  return { out, text: () => text };
}

/** Script text: waits until `file` exists. */
function waitFor(file: string): string {
  return `await new Promise((r) => { const t = setInterval(() => { if (fs.existsSync(${JSON.stringify(file)})) { clearInterval(t); r(); } }, 5); });`;
}

/** Script text: prints `tag from..to-1` on stdout. */
function print(tag: string, from: number, to: number): string {
  return `for (let i = ${from}; i < ${to}; i++) console.log('${tag} ' + i);`;
}

describe('npm test: the system tier beside the others (scripts/lib/beside.ts)', () => {
  it('when both run, then the held one prints whole, framed, as soon as it ends, between two lines of the live one; every line of each comes once and in order, and vitest counts are taken', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'crs-beside-'));
    const liveStarted = path.join(dir, 'live-started');
    const blockSeen = path.join(dir, 'block-seen');
    try {
      const { outcomes, lines } = await beside(
        node(
          'live',
          `import fs from 'node:fs'; ${print('live', 0, 3)} ${waitFor(blockSeen)} ${print('live', 3, 6)}
           console.error('live err'); console.log('      Tests  3 passed | 1 skipped (4)');`,
        ),
        node(
          'held',
          `import fs from 'node:fs'; ${waitFor(liveStarted)} ${print('held', 0, 6)} console.error('held err');
           console.log('\u001b[2m      Tests \u001b[22m 5 passed (5)');`,
        ),
        (line) => {
          if (line === 'live 2') writeFileSync(liveStarted, '');
          if (line === '──── end of held ────') writeFileSync(blockSeen, '');
        },
      );
      expect(outcomes).toEqual([
        { name: 'live', code: 0, tests: '3 passed | 1 skipped (4)' },
        { name: 'held', code: 0, tests: '5 passed (5)' },
      ]);
      const open = lines.indexOf('──── held (ran beside live) ────');
      const close = lines.indexOf('──── end of held ────');
      expect(lines.slice(0, open).filter((l) => l.startsWith('live'))).toEqual([
        'live 0',
        'live 1',
        'live 2',
      ]);
      // stdout's and stderr's lines keep their order within each, not between the two pipes.
      expect(lines.slice(open + 1, close).sort()).toEqual(
        [
          'held 0',
          'held 1',
          'held 2',
          'held 3',
          'held 4',
          'held 5',
          'held err',
          '\u001b[2m      Tests \u001b[22m 5 passed (5)',
        ].sort(),
      );
      expect(lines.slice(open + 1, close).filter((l) => /^held \d/.test(l))).toEqual(
        Array.from({ length: 6 }, (_, i) => `held ${i}`),
      );
      expect(
        lines
          .slice(close)
          .filter((l) => l.startsWith('live'))
          .sort(),
      ).toEqual(['live 3', 'live 4', 'live 5', 'live err'].sort());
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('when either fails, then its exit status is its outcome; a held one that ends last prints after the live one', async () => {
    const failedHeld = await beside(
      node('live', print('live', 0, 2)),
      node('held', `setTimeout(() => { ${print('held', 0, 3)} process.exitCode = 3; }, 300);`),
    );
    expect(failedHeld.outcomes.map((o) => o.code)).toEqual([0, 3]);
    const open = failedHeld.lines.indexOf('──── held (ran beside live) ────');
    expect(failedHeld.lines.slice(0, open).filter((l) => l.startsWith('live'))).toEqual(['live 0', 'live 1']);
    expect(failedHeld.lines.slice(open + 1, open + 4)).toEqual(['held 0', 'held 1', 'held 2']);

    const failedLive = await beside(node('live', 'process.exit(2)'), node('held', print('held', 0, 1)));
    expect(failedLive.outcomes.map((o) => o.code)).toEqual([2, 0]);
    const killed = await beside(node('live', 'process.kill(process.pid, "SIGKILL")'), node('held', ''));
    expect(killed.outcomes.map((o) => o.code)).toEqual([1, 0]);
  });

  it('when a command has variables of its own, then its process sees them over the shared ones and the other does not', async () => {
    const show = "console.log(process.env.CRS_BESIDE_OWN + ' ' + process.env.CRS_BESIDE_SHARED)";
    const { lines } = await beside(
      { ...node('live', `console.log('live ' + process.env.CRS_BESIDE_OWN)`), env: {} },
      { ...node('held', show), env: { CRS_BESIDE_OWN: 'held-only', CRS_BESIDE_SHARED: 'held-value' } },
    );
    expect(lines).toContain('live undefined');
    expect(lines).toContain('held-only held-value');
  });

  it('when CRS_TEST_WORKERS is set (npm test sets it for the unit and integration tiers), then those two tiers run that many files at a time and the system tier still one', () => {
    const read = `const c = (await import(${JSON.stringify(path.join(root, 'vitest.config.ts'))})).default;
      console.log(JSON.stringify(c.test.projects.map((p) => [p.test.name, p.test.maxWorkers ?? null, p.test.fileParallelism ?? true])));`;
    const projects = (workers: string | undefined) =>
      JSON.parse(
        execFileSync(process.execPath, ['--input-type=module', '-e', read], {
          cwd: root,
          env: { ...process.env, CRS_TEST_WORKERS: workers },
          encoding: 'utf8',
        }),
      ) as [string, number | null, boolean][];
    expect(projects('1')).toEqual([
      ['unit', 1, true],
      ['integration', 1, true],
      ['system', null, false],
    ]);
    const unset = projects(undefined);
    expect(unset[0]?.[1]).toBeGreaterThanOrEqual(2);
    expect(unset[1]?.[1]).toBe(unset[0]?.[1]);
    const runner = readFileSync(path.join(root, 'scripts', 'test.ts'), 'utf8');
    expect(runner).toMatch(/CRS_TEST_WORKERS: beside/);
  });

  it('when the runner is stopped (SIGTERM, Ctrl-C), then both are stopped with the same signal and what they printed is still shown', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'crs-beside-'));
    const signals = new EventEmitter();
    // Each, once it listens for SIGTERM, says so and leaves a file; then waits to be stopped.
    const waitForever = (tag: string) =>
      node(
        tag,
        `import fs from 'node:fs';
         process.on('SIGTERM', () => { console.log('${tag} stopped'); process.exit(7); });
         console.log('${tag} ready'); fs.writeFileSync(${JSON.stringify(path.join(dir, tag))}, '');
         setInterval(() => {}, 1000);`,
      );
    try {
      const { out, text } = collect();
      const run = runBeside(waitForever('live'), waitForever('held'), {
        cwd: root,
        env: process.env,
        out,
        signals: signals as unknown as Pick<NodeJS.Process, 'on' | 'off'>,
      });
      await vi.waitFor(() => expect(readdirSync(dir).sort()).toEqual(['held', 'live']), {
        timeout: 30_000,
        interval: 20,
      });
      signals.emit('SIGTERM', 'SIGTERM');
      const outcomes = await run;
      expect(outcomes.map((o) => o.code)).toEqual([7, 7]);
      expect(
        text()
          .split('\n')
          .filter((l) => /^(live|held) /.test(l))
          .sort(),
      ).toEqual(['held ready', 'held stopped', 'live ready', 'live stopped']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("when vitest's count line has failures, skips or todos, then each figure is read, and a missing one is 0", () => {
    expect(countsOf('1 failed | 765 passed | 1 skipped (767)')).toEqual({
      passed: 765,
      failed: 1,
      skipped: 1,
    });
    expect(countsOf('380 passed | 1 skipped | 2 todo (383)')).toEqual({ passed: 380, failed: 0, skipped: 3 });
    expect(countsOf('5 passed (5)')).toEqual({ passed: 5, failed: 0, skipped: 0 });
    expect(countsOf(undefined)).toEqual({ passed: 0, failed: 0, skipped: 0 });
  });

  it('npm test is this runner, and each tier alone is its vitest project', () => {
    const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    expect(pkg.scripts.test).toBe('node scripts/test.ts');
    // CI runs it as the README gives it: with arguments it would be one plain `vitest run`.
    const ci = readFileSync(path.join(root, '.ci', 'run'), 'utf8');
    expect(ci.split('\n').filter((l) => /^\s*npm test\b/.test(l))).toEqual(['npm test']);
    for (const tier of ['unit', 'integration', 'system'])
      expect(pkg.scripts[`test:${tier}`]).toBe(`vitest run --project ${tier}`);
  });
});
