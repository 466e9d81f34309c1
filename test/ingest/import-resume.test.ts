import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRecords, toJsonl } from '../helpers/export-lines.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

const root = path.resolve(import.meta.dirname, '..', '..');
const dir = mkdtempSync(path.join(tmpdir(), 'crs-resume-'));
const file = path.join(dir, 'export.jsonl');
const TOTAL = 12_000;

function runImport(tw: TestWarehouse): ChildProcess {
  return spawn(process.execPath, [path.join(root, 'bin/crs-sync.js'), 'import', file, '--no-progress'], {
    env: {
      ...process.env,
      DATABASE_URL: tw.url,
      CRS_SCHEMA: tw.schema,
      CRS_BATCH_SIZE: '100',
      CRS_LOAD_PARTITIONS: '3',
      LOG_LEVEL: 'silent',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

async function exitOf(child: ChildProcess): Promise<number | null> {
  return await new Promise((resolve) => child.on('exit', (code) => resolve(code)));
}

async function committed(tw: TestWarehouse): Promise<number> {
  const r = await tw.w.pool
    .query<{ n: number | null }>('select min(lines_committed)::bigint as n from load_checkpoints')
    .catch(() => ({ rows: [{ n: 0 }] }));
  return r.rows[0]?.n ?? 0;
}

const ROWS = `select message_id, thread_id, user_id, message_time, message_date::text, input, response, extra,
  record_hash, _source_line, _load_id, _deleted_at from analytics_messages order by message_id`;
const RUN = `select kind, status, rows_read, rows_inserted, rows_updated, rows_unchanged, rows_rejected
  from sync_runs order by load_id`;

describe('import killed and resumed', () => {
  let clean: TestWarehouse;
  let killed: TestWarehouse;
  beforeAll(async () => {
    const recs: unknown[] = makeRecords(TOTAL, { seed: 'resume', threads: 40 });
    // A few bad lines and a duplicate key, so the resumed counters are checked on every path.
    recs.splice(100, 0, '{"broken": ');
    recs.splice(5000, 0, { ...(recs[10] as object), Response: 'later version' });
    writeFileSync(file, toJsonl(recs));
    clean = await createTestWarehouse({ prefix: 'clean' });
    killed = await createTestWarehouse({ prefix: 'killed' });
  });
  afterAll(async () => {
    await clean?.dispose();
    await killed?.dispose();
  });

  it('when an import is killed (SIGKILL) twice mid-file and run again, then the warehouse equals a clean load row by row', async () => {
    expect(await exitOf(runImport(clean))).toBe(0);

    for (const fraction of [0.2, 0.55]) {
      const before = await committed(killed);
      const child = runImport(killed);
      const exited = exitOf(child);
      // Kill once a few more batches have committed, well before the end of the file.
      for (;;) {
        const c = await committed(killed);
        if (c >= Math.max(before + 1, TOTAL * fraction)) break;
        await sleep(5);
      }
      child.kill('SIGKILL');
      expect(await exited).toBeNull();
      expect(await committed(killed)).toBeLessThan(TOTAL);
    }
    const last = runImport(killed);
    let out = '';
    last.stdout?.on('data', (d) => {
      out += d;
    });
    expect(await exitOf(last)).toBe(0);
    expect(out).toContain('resumed from line');

    const [a, b] = await Promise.all([clean.w.pool.query(ROWS), killed.w.pool.query(ROWS)]);
    expect(b.rows.length).toBe(TOTAL);
    expect(b.rows).toEqual(a.rows);
    const [ra, rb] = await Promise.all([clean.w.pool.query(RUN), killed.w.pool.query(RUN)]);
    expect(rb.rows).toEqual(ra.rows);
    expect(rb.rows[0]).toMatchObject({
      status: 'succeeded',
      rows_inserted: TOTAL,
      rows_updated: 1,
      rows_rejected: 1,
    });
    const rej = 'select line_no, error_code from rejected_records order by line_no';
    expect((await killed.w.pool.query(rej)).rows).toEqual((await clean.w.pool.query(rej)).rows);
  });
});
