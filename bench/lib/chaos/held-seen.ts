import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { Simulator } from '../../../src/simulator/index.ts';
import { Rng } from '../../../src/simulator/prng.ts';
import { startBackfill } from '../../../src/temporal/runs.ts';
import type { Warehouse } from '../../../src/warehouse/db.ts';
import { runCli } from './cli.ts';
import { wronglyDeleted } from './compare.ts';
import { type ExportProxy, parsedId, startExportProxy } from './export-proxy.ts';

/**
 * The chaos run's "held, then seen again" step (decision 0008, items 5 to 10), after the clean
 * pass, in rounds: a worker of its own reads the simulator through a proxy (export-proxy.ts) that
 * drops a seeded share (15 to 50 %) of one day's records from its export, which stays known
 * complete, so the day's deletes are held (more than CRS_DELETE_GUARD); then the day is loaded
 * again with every record, one of three ways by round; then `crs-sync deletes list` and
 * `crs-sync deletes apply` of the day, as an operator would. Expected: apply deletes no row the
 * service holds, and deletes what list called applicable. Before the fix of issue 20, a held row
 * re-loaded unchanged (the second and third ways) kept `_loaded_at` and was deleted by apply.
 */

/** How a round loads the day again, with every record of it. */
export type Reload =
  /** Its export through the proxy, every line, without the final newline: not known complete. */
  | 'export without final newline'
  /** Its export as the service sends it: known complete, so it replaces the held set. */
  | 'export'
  /** `crs-sync import FILE` of the day's records, without --from/--to. */
  | 'import';

const RELOADS: readonly Reload[] = ['export without final newline', 'import', 'export'];

export interface HeldSeenReport {
  rounds: number;
  /** Ids the partial exports held, over every round. */
  held: number;
  /** What `deletes apply` deleted, over every round (none of it may be a row the service holds). */
  deletedByApply: number;
  byReload: Partial<Record<Reload, number>>;
  /** Rows `deletes apply` left deleted that the service still holds: one line each. Must be empty. */
  deletedInSource: string[];
  /** Anything else that kept a round from testing what it should (a failed load, nothing held, list ≠ apply). */
  problems: string[];
}

const TASK_QUEUE = 'crs-chaos-held';

/**
 * The export without the records of `ids` (any case, any spelling the export wrote them in: a
 * record's id is what JSON.parse reads; an id-like text elsewhere in the line, such as a decoy
 * before an escaped key or the tail of an escaped first character, is not it).
 */
function without(text: string, ids: Set<string>): string {
  return text
    .split('\n')
    .filter((l) => {
      const id = parsedId(l);
      return id === undefined || !ids.has(id);
    })
    .join('\n');
}

/**
 * The whole step: the proxy, a worker of its own (started by `startWorker` with the env it is
 * given on top of the run's), `rounds` rounds over `days` in turn. `cliEnv` is what the CLI needs
 * to reach the warehouse.
 */
export async function heldSeenPhase(o: {
  w: Warehouse;
  sim: Simulator;
  client: Client;
  days: string[];
  rounds: number;
  seed: number;
  cliEnv: Record<string, string>;
  startWorker: (env: Record<string, string>) => void;
  log: (line: string) => void;
}): Promise<HeldSeenReport> {
  const report: HeldSeenReport = {
    rounds: 0,
    held: 0,
    deletedByApply: 0,
    byReload: {},
    deletedInSource: [],
    problems: [],
  };
  if (o.rounds === 0) return report;
  const proxy = await startExportProxy(o.sim.baseUrl);
  const dir = await mkdtemp(path.join(tmpdir(), 'crs-chaos-held-'));
  try {
    o.startWorker({ CRS_BASE_URL: proxy.baseUrl, TEMPORAL_TASK_QUEUE: TASK_QUEUE });
    const rng = new Rng(o.seed ^ 0x48454c44);
    const first = rng.int(RELOADS.length);
    for (let r = 0; r < o.rounds; r++) {
      const day = o.days[r % o.days.length]!;
      const reload = RELOADS[(first + r) % RELOADS.length]!;
      await round({ ...o, proxy, dir, rng, report, r, day, reload });
      report.rounds++;
      report.byReload[reload] = (report.byReload[reload] ?? 0) + 1;
      o.log(`chaos: held, then seen again, round ${r + 1}/${o.rounds} (${day}, ${reload}) done`);
    }
  } finally {
    proxy.rewrite(null);
    await proxy.close();
    await rm(dir, { recursive: true, force: true });
  }
  return report;
}

async function round(o: {
  w: Warehouse;
  sim: Simulator;
  client: Client;
  cliEnv: Record<string, string>;
  proxy: ExportProxy;
  dir: string;
  rng: Rng;
  report: HeldSeenReport;
  r: number;
  day: string;
  reload: Reload;
}): Promise<void> {
  const what = `round ${o.r + 1} (${o.day}, then ${o.reload})`;
  const problem = (msg: string) => o.report.problems.push(`held, then seen again, ${what}: ${msg}`);
  const load = async (edit: ((body: string) => string) | null, step: string) => {
    o.proxy.rewrite(edit);
    const handle = await startBackfill(o.client, TASK_QUEUE, { from: o.day, to: o.day, enrich: false });
    const res = await handle.result().catch((err: Error) => ({ failedDays: [`${o.day} (${err.message})`] }));
    if (res.failedDays.length > 0) problem(`the ${step} failed: ${res.failedDays.join(', ')}`);
  };
  const q = async <T>(text: string, values: unknown[]) => (await o.w.pool.query(text, values)).rows as T[];
  const ledger = async () =>
    (
      await q<{ d: number; h: number }>(
        'select rows_deleted::int as d, deletes_held::int as h from sync_days where day = $1',
        [o.day],
      )
    )[0];

  // ---- a partial export, known complete: its deletes are held ----
  const ids = o.sim.truth.exportDay(o.day).map((x) => x['Message ID'].toLowerCase());
  const share = 0.15 + o.rng.next() * 0.35;
  const dropped = new Set(ids.filter(() => o.rng.chance(share)));
  const before = await ledger();
  // Rows wrongly deleted before the round are not this round's doing (a round before it counted them).
  const already = new Set(await wronglyDeleted(o.w, o.sim, [o.day]));
  await load((body) => without(body, dropped), 'partial export');
  const held = await ledger();
  if ((held?.h ?? 0) === 0 || held?.d !== before?.d) {
    problem(
      `the partial export (${dropped.size} of ${ids.length} records dropped) left ${JSON.stringify(held)}`,
    );
  }
  o.report.held += held?.h ?? 0;

  // ---- the day again, every record ----
  if (o.reload === 'import') {
    const file = path.join(o.dir, `${o.day}-${o.r}.jsonl`);
    await writeFile(file, `${o.sim.truth.exportDayLines(o.day).join('\n')}\n`);
    const imp = await runCli(o.cliEnv, ['import', file, '--no-progress']);
    if (imp.code !== 0) problem(`crs-sync import exited ${imp.code}: ${imp.out}`);
  } else {
    await load(
      o.reload === 'export' ? null : (body) => (body.endsWith('\n') ? body.slice(0, -1) : body),
      'reload',
    );
  }

  // ---- the operator's review and apply ----
  const list = await runCli(o.cliEnv, ['deletes', 'list', '--day', o.day, '--json']);
  const apply = await runCli(o.cliEnv, ['deletes', 'apply', '--day', o.day, '--json']);
  if (list.code !== 0 || apply.code !== 0) {
    problem(`deletes list exited ${list.code}, apply ${apply.code}: ${list.out} ${apply.out}`);
    return;
  }
  const applicable = (JSON.parse(list.out).days as Array<{ applicable: number }>).reduce(
    (n, d) => n + d.applicable,
    0,
  );
  const deleted = (JSON.parse(apply.out).applied as Array<{ deleted: number }>).reduce(
    (n, d) => n + d.deleted,
    0,
  );
  o.report.deletedByApply += deleted;
  if (applicable !== deleted) problem(`deletes list said ${applicable} applicable, apply deleted ${deleted}`);
  for (const d of await wronglyDeleted(o.w, o.sim, [o.day])) {
    if (!already.has(d)) o.report.deletedInSource.push(`${what}: ${d}`);
  }
}
