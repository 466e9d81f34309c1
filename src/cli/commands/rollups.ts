import type { Command } from 'commander';
import { dayRange } from '../../common/civil-date.ts';
import { CrsError } from '../../errors.ts';
import { rollupStatus } from '../../warehouse/read/index.ts';
import { rebuildRollups } from '../../warehouse/rollups/rebuild.ts';
import { refreshRollups } from '../../warehouse/rollups/refresh.ts';
import { checkedDay } from '../args.ts';
import { loadContext, openConfiguredWarehouse } from '../context.ts';

// Days per transaction of a ranged rebuild: each chunk commits on its own, so an interrupted
// rebuild keeps what it finished and the views stay exact throughout.
const CHUNK_DAYS = 31;

const seconds = (t0: number) => `${((performance.now() - t0) / 1000).toFixed(1)} s`;

export function registerRollups(program: Command): void {
  const rollups = program
    .command('rollups')
    .summary('the aggregate tables behind the BI views and the dashboard: status, refresh, rebuild')
    .description(
      'Rollups are per-day aggregate tables (rollup_daily, rollup_user_daily, rollup_thread_daily, ' +
        'rollup_users, rollup_threads, rollup_citation_*) that keep BI queries off the raw tables. ' +
        'Every load and every enrichment batch keeps them current by itself: triggers mark the days ' +
        'and threads a write touched, and the end of the load (or batch) recomputes exactly those. ' +
        'The BI views (daily_usage, user_activity, thread_summary, citation_sources) read them while ' +
        'nothing is marked and the raw tables otherwise, so a view is never stale.\n\n' +
        'You need this command after upgrading a warehouse that already holds data (`rebuild` once; ' +
        'until then the views read the raw tables), after writing the raw tables with triggers off ' +
        '(session_replication_role = replica), or to check the rollups against the raw tables ' +
        '(`rebuild --from D --to D`). Columns: docs/data-dictionary.md, "Rollups".',
    );
  registerRollupStatus(rollups);
  registerRefresh(rollups);
  registerRebuild(rollups);
}

function registerRollupStatus(rollups: Command): void {
  rollups
    .command('status')
    .summary('whether the rollups are current, when they were last refreshed and rebuilt, their sizes')
    .description(
      'Says whether the rollups are current (nothing marked since the last refresh), which days and\n' +
        'threads are marked, which days wait for a running pull, when they were last refreshed and\n' +
        'rebuilt, and how many rows each rollup table holds. Reads only.',
    )
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      const ctx = loadContext();
      const wh = await openConfiguredWarehouse(ctx, { connections: 1, schema: 'current' });
      try {
        const out = await rollupStatus(wh.warehouse.pool);
        const { current, rows } = out;
        if (o.json) {
          process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
          return;
        }
        process.stdout.write(
          `rollups: ${current ? 'current' : 'not current (the dashboard, the views and the commands read the raw tables until the next refresh)'}\n` +
            (out.rebuildNeeded ? 'a rebuild is pending: run `crs-sync rollups rebuild`\n' : '') +
            `marked: ${out.markedDays} day(s), ${out.markedThreads} thread(s)\n` +
            (out.waitingDays.length > 0
              ? `waiting for a running pull's finalize: ${out.waitingDays.join(', ')} (read as its last pull left it)\n`
              : '') +
            `last refresh: ${out.refreshedAt ?? 'never'}; last rebuild: ${out.rebuiltAt ?? 'never'}\n` +
            Object.entries(rows)
              .map(([t, n]) => `  ${t.padEnd(28)} ${n}`)
              .join('\n') +
            '\n',
        );
      } finally {
        await wh.close();
      }
    });
}

function registerRefresh(rollups: Command): void {
  rollups
    .command('refresh')
    .summary(
      'recompute what loads and enrichment marked but did not refresh (normally nothing), and what a running pull has loaded so far; a pending rebuild runs',
    )
    .description(
      'Recomputes the rollups of what loads and enrichment marked but did not refresh (normally\n' +
        'nothing: each load refreshes what it wrote), and of what a running pull has loaded so far.\n' +
        'A rebuild that an upgrade left pending runs instead.',
    )
    .action(async () => {
      const ctx = loadContext();
      const wh = await openConfiguredWarehouse(ctx, { connections: 1 });
      try {
        const t0 = performance.now();
        const r = await refreshRollups(wh.warehouse.pool, (step) => process.stderr.write(`  ${step}\n`), {
          rebuild: true,
          release: 'all',
        });
        process.stdout.write(
          r.rebuilt
            ? `rollups rebuilt in ${seconds(t0)}\n`
            : `rollups refreshed: ${r.days} day(s), ${r.threads} thread(s), ${r.users} user(s) in ${seconds(t0)}\n`,
        );
      } finally {
        await wh.close();
      }
    });
}

function registerRebuild(rollups: Command): void {
  rollups
    .command('rebuild')
    .summary('recompute the rollups from the raw tables (all of them, or the days of a range)')
    .description(
      'Without --from/--to: empties every rollup table and fills it again from the raw tables, in one ' +
        'transaction (readers see the old rollups until it commits), naming each table as it starts. ' +
        'With a range: recomputes the days from --from to --to and every thread with export rows or ' +
        'citations on them, 31 days per transaction, showing each chunk; an interrupted run keeps the ' +
        'chunks it finished.\n\n' +
        'Examples:\n' +
        '  crs-sync rollups rebuild                                     # after an upgrade\n' +
        '  crs-sync rollups rebuild --from 2026-11-01 --to 2026-11-30   # a month again',
    )
    .option('--from <day>', 'first day (YYYY-MM-DD) of the range to recompute')
    .option('--to <day>', 'last day (YYYY-MM-DD) of the range; default: --from')
    .action(async (o: { from?: string; to?: string }) => {
      if (o.to !== undefined && o.from === undefined) throw new CrsError('USAGE', '--to needs --from');
      const from = o.from === undefined ? undefined : checkedDay('--from', o.from);
      const to = o.to === undefined ? from : checkedDay('--to', o.to);
      if (from !== undefined && to !== undefined && to < from)
        throw new CrsError('USAGE', `--to ${to} is before --from ${from}`);
      const ctx = loadContext();
      const wh = await openConfiguredWarehouse(ctx, { connections: 1 });
      try {
        const pool = wh.warehouse.pool;
        const t0 = performance.now();
        if (from === undefined || to === undefined) {
          process.stderr.write('rebuilding every rollup table:\n');
          const r = await rebuildRollups(pool, null, (table) =>
            process.stderr.write(`  ${table} (${seconds(t0)})\n`),
          );
          process.stdout.write(
            `rollups rebuilt: ${r.days} day(s), ${r.users} user(s), ${r.threads} thread(s) in ${seconds(t0)}\n`,
          );
          return;
        }
        const days = dayRange(from, to);
        let done = 0;
        for (let i = 0; i < days.length; i += CHUNK_DAYS) {
          const chunk = days.slice(i, i + CHUNK_DAYS);
          const a = chunk[0] ?? from;
          const b = chunk[chunk.length - 1] ?? to;
          await rebuildRollups(pool, { from: a, to: b });
          done += chunk.length;
          process.stderr.write(`  ${a} … ${b}: ${done}/${days.length} days (${seconds(t0)})\n`);
        }
        process.stdout.write(
          `rollups recomputed for ${days.length} day(s), ${from} … ${to}, in ${seconds(t0)}\n`,
        );
      } finally {
        await wh.close();
      }
    });
}
