import { readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { type PgCluster, startPgCluster } from '../chaos/pg-cluster.ts';
import { describeUrl } from '../db.ts';
import { postgresProcesses, TICK } from '../measure.ts';

/**
 * The PostgreSQL server the intraday bench writes to, and what it measures there: the server's
 * CPU over a pull, the WAL it wrote, and the rows the tables took.
 *
 * By default a cluster of the bench's own (bench/lib/chaos/pg-cluster.ts: the machine's binaries,
 * a data directory under the temporary directory, fsync off): nothing else runs there, so its WAL
 * position and the CPU of all its processes (backends, WAL writer, checkpointer, autovacuum) are
 * the pulls' alone. With `--database-url` the bench uses that server instead: then the CPU is
 * that of the backends of the bench's own connections (found by application_name) and the WAL is
 * the whole cluster's, other sessions' writes included; the table says which.
 */
export interface BenchServer {
  url: string;
  /** Printed with the results: which server and what the CPU and WAL columns count. */
  describe: string;
  /** Starts a CPU meter over the server processes of this bench's pulls. */
  meter(appName: string): CpuMeter;
  walLsn(): Promise<number>;
  /** Rows inserted, updated and deleted in the schema's tables, per the statistics collector. */
  tableWrites(schema: string, appName: string): Promise<TableWrites>;
  close(): Promise<void>;
}

export interface CpuMeter {
  /** Takes the processes' times now (call every few hundred ms: a backend may exit). */
  sample(): Promise<void>;
  /** Seconds of CPU since the meter started. */
  seconds(): Promise<number>;
  /**
   * Seconds of this process's own CPU its samples took so far (reading /proc for every server
   * process): the caller's process.cpuUsage() counts them, and they are not the loader's.
   */
  ownSeconds(): number;
}

export interface TableWrites {
  inserted: number;
  updated: number;
  deleted: number;
}

export async function openBenchServer(databaseUrl: string | undefined): Promise<BenchServer> {
  const cluster: PgCluster | null = databaseUrl ? null : await startPgCluster();
  const url = databaseUrl ?? cluster!.url;
  const monitor = new pg.Client({ connectionString: url, application_name: 'crs-bench-monitor' });
  await monitor.connect();
  const monitorPid = (await monitor.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
  const postmaster = cluster
    ? Number(readFileSync(path.join(cluster.dir, 'data', 'postmaster.pid'), 'utf8').split('\n', 1)[0])
    : null;

  const ourPids = async (appName: string): Promise<Set<number>> => {
    if (postmaster !== null) {
      const out = new Set<number>();
      for (const [pid, p] of postgresProcesses())
        if (pid === postmaster || p.ppid === postmaster) out.add(pid);
      out.delete(monitorPid);
      return out;
    }
    const r = await monitor.query<{ pid: number }>(
      'select pid from pg_stat_activity where application_name = $1',
      [appName],
    );
    return new Set(r.rows.map((x) => x.pid));
  };

  return {
    url,
    describe: cluster
      ? `a PostgreSQL cluster of the bench's own (${cluster.dir}, fsync off): server CPU = all its processes, WAL = its own`
      : `${describeUrl(url)}: server CPU = the backends of the bench's connections only; WAL = the whole cluster's (other sessions' writes included)`,
    meter: (appName) => {
      const start = postgresProcesses();
      const last = new Map<number, number>();
      let ownUs = 0;
      const sample = async () => {
        // The /proc reads are synchronous (ourPids' too, on the bench's own cluster, up to its
        // return): their CPU, measured around them, is this meter's alone.
        const c0 = process.cpuUsage();
        const now = postgresProcesses();
        const pids = ourPids(appName);
        const c = process.cpuUsage(c0);
        ownUs += c.user + c.system;
        for (const pid of await pids) {
          const p = now.get(pid);
          if (p) last.set(pid, p.ticks);
        }
      };
      return {
        sample,
        seconds: async () => {
          await sample();
          let ticks = 0;
          for (const [pid, t] of last) ticks += t - (start.get(pid)?.ticks ?? 0);
          return ticks / TICK;
        },
        ownSeconds: () => ownUs / 1e6,
      };
    },
    walLsn: async () =>
      Number(
        (await monitor.query<{ b: string }>("select pg_current_wal_lsn() - '0/0'::pg_lsn as b")).rows[0]!.b,
      ),
    tableWrites: async (schema, appName) => {
      // A backend sends its table counts to the statistics at most once a second, and all of them
      // when it exits: wait for the bench's connections to be gone before reading.
      for (let i = 0; i < 100; i++) {
        const r = await monitor.query<{ n: string }>(
          'select count(*) as n from pg_stat_activity where application_name = $1',
          [appName],
        );
        if (Number(r.rows[0]!.n) === 0) break;
        await sleep(100);
      }
      await monitor.query('select pg_stat_clear_snapshot()');
      const r = await monitor.query<{ i: string; u: string; d: string }>(
        `select coalesce(sum(n_tup_ins), 0) as i, coalesce(sum(n_tup_upd), 0) as u, coalesce(sum(n_tup_del), 0) as d
         from pg_stat_user_tables where schemaname = $1`,
        [schema],
      );
      const row = r.rows[0]!;
      return { inserted: Number(row.i), updated: Number(row.u), deleted: Number(row.d) };
    },
    close: async () => {
      await monitor.end().catch(() => {});
      await cluster?.destroy();
    },
  };
}
