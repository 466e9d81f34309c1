import type { Client } from '@temporalio/client';
import type { Simulator } from '../../../src/simulator/index.ts';
import { startBackfill } from '../../../src/temporal/runs.ts';
import type { Warehouse } from '../../../src/warehouse/db.ts';
import { type Erased, isErased } from './erased.ts';
import { type ExportProxy, parsedId, startExportProxy } from './export-proxy.ts';

/**
 * The chaos run's "over-long line with a late id" step, after the clean pass: one day, already
 * loaded in full, is exported again, known complete, with one record's line grown past the
 * worker's CRS_MAX_LINE_BYTES so that its `Message ID` and `Message Time` lie beyond the 64 KiB
 * the quarantine keeps. A worker of its own reads the export through a proxy in front of the
 * simulator (export-proxy.ts) that grows that line (everything else passes through unchanged). Expected: that
 * record's row stays live, the line is quarantined with its id and day, the day deletes and
 * holds nothing, and its ledger counts the poison lines and this one as rejected.
 *
 * When the day holds a record `crs-sync forget` erased, its line is grown too, its user and
 * thread ids as far beyond the prefix: it must be suppressed like the erased records' other
 * lines (counted so in the ledger), not quarantined, and no row may name its message id.
 */

/** The limit the step's worker runs with: far above any line the simulator writes. */
export const LATE_ID_MAX_LINE_BYTES = 1024 * 1024;

/**
 * The export with the line of `id` grown before its ids (any case, any spelling the export wrote
 * it in: the record's id is what JSON.parse reads, not the first id-like text of the line).
 */
function grown(text: string, ids: ReadonlySet<string>): string {
  const pad = 'late id '.repeat(Math.ceil((LATE_ID_MAX_LINE_BYTES + 1) / 8));
  return text
    .split('\n')
    .map((l) => (ids.has(parsedId(l) ?? '') ? l.replace('"Input":"', `"Input":"${pad}`) : l))
    .join('\n');
}

const TASK_QUEUE = 'crs-chaos-late-id';

/**
 * The whole step on `day`: the proxy, a worker of its own (started by `startWorker` with the env
 * it is given on top of the run's), the load, the checks. Returns the differences from what is
 * expected (empty when the step holds).
 */
export async function lateIdPhase(o: {
  w: Warehouse;
  sim: Simulator;
  client: Client;
  day: string;
  /** What `crs-sync forget` erased: the grown line is one of a record kept. */
  erased: Erased;
  startWorker: (env: Record<string, string>) => void;
}): Promise<string[]> {
  const proxy = await startExportProxy(o.sim.baseUrl);
  try {
    o.startWorker({
      CRS_BASE_URL: proxy.baseUrl,
      CRS_MAX_LINE_BYTES: String(LATE_ID_MAX_LINE_BYTES),
      TEMPORAL_TASK_QUEUE: TASK_QUEUE,
    });
    return await runLateIdStep({ ...o, proxy });
  } finally {
    await proxy.close();
  }
}

async function runLateIdStep(o: {
  w: Warehouse;
  sim: Simulator;
  client: Client;
  proxy: ExportProxy;
  day: string;
  erased: Erased;
}): Promise<string[]> {
  const diffs: string[] = [];
  const records = o.sim.truth.exportDayLines(o.day).filter((l) => l.startsWith('{"Input":"'));
  const lines = records.filter((l) => !isErased(o.erased, JSON.parse(l)));
  const line = lines[Math.floor(lines.length / 2)];
  if (line === undefined) return [`late id ${o.day}: the day has no record to grow`];
  const id = (JSON.parse(line) as Record<string, string>)['Message ID']!.toLowerCase();
  const erasedLine = records.find((l) => isErased(o.erased, JSON.parse(l)));
  const erasedId =
    erasedLine && (JSON.parse(erasedLine) as Record<string, string>)['Message ID']!.toLowerCase();
  o.proxy.rewrite((body) => grown(body, new Set(erasedId ? [id, erasedId] : [id])));
  const handle = await startBackfill(o.client, TASK_QUEUE, { from: o.day, to: o.day, enrich: false });
  const r = await handle.result().catch((err: Error) => ({ failedDays: [`${o.day} (${err.message})`] }));
  if (r.failedDays.length > 0) diffs.push(`late id: the day's load failed: ${r.failedDays.join(', ')}`);
  const q = async <T>(text: string, values: unknown[]) => (await o.w.pool.query(text, values)).rows as T[];
  const [row] = await q<{ deleted: boolean }>(
    'select _deleted_at is not null as deleted from analytics_messages where message_id = $1',
    [id],
  );
  if (row?.deleted !== false) diffs.push(`late id: analytics_messages ${id}: ${row ? 'deleted' : 'missing'}`);
  const rejects = await q<{ day: string | null; code: string }>(
    `select day::text as day, error_code as code from rejected_records
     where source = 'export' and message_id = $1 and error_code = 'line_too_long'`,
    [id],
  );
  if (rejects.length !== 1 || rejects[0]?.day !== o.day) {
    diffs.push(`late id: the quarantine of ${id}'s line: ${JSON.stringify(rejects)}`);
  }
  const poison = o.sim.truth.poisonLines(o.day).filter((l) => l.trim() !== '').length;
  const suppressed = records.length - lines.length;
  const [led] = await q<{ j: number; s: number; d: number; h: number }>(
    `select rows_rejected::int as j, rows_suppressed::int as s, rows_deleted::int as d, deletes_held::int as h
       from sync_days where day = $1`,
    [o.day],
  );
  if (led?.j !== poison + 1 || led.s !== suppressed || led.d !== 0 || led.h !== 0) {
    diffs.push(
      `late id: sync_days ${o.day}: ${JSON.stringify(led)}, expected ${poison + 1} rejected, ` +
        `${suppressed} suppressed, nothing deleted or held`,
    );
  }
  if (erasedId) {
    // The erased record's over-long line: suppressed, so neither a row nor a reject names it.
    const named = await q<{ t: string }>(
      `select 'analytics_messages' as t from analytics_messages where message_id = $1
       union all select 'rejected_records' from rejected_records where message_id = $1`,
      [erasedId],
    );
    if (named.length > 0) {
      diffs.push(
        `late id: the over-long line of erased record ${erasedId} was not suppressed: in ${named.map((r) => r.t).join(', ')}`,
      );
    }
  }
  return diffs;
}
