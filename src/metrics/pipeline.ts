import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { ALERT_KINDS, type AlertKind } from '../common/alert-kinds.ts';
import type { LoadCounts } from '../common/counts.ts';
import type { WarehouseGauges } from '../warehouse/gauges.ts';

/**
 * The pipeline's own Prometheus series (prom-client, docs/decisions/0013-metrics.md), one
 * registry per process. Counters move where an activity returns its counts, in the worker
 * process that ran it; gauges are read from the warehouse when scraped (`setWarehouseReader`).
 * Labels are stable, few-valued things (source, outcome, code, status, kind, state), never ids
 * or days: every label value becomes a series Prometheus keeps.
 */
export const registry = new Registry();

/** What the warehouse says at scrape time: the reader `setWarehouseReader` takes returns it. */
export type { WarehouseGauges };
export { ALERT_KINDS, type AlertKind };

export const FRESHNESS_SOURCES = ['export', 'enrichment'] as const;
export const FRESHNESS_STATES = ['on_time', 'late', 'failing', 'no_data'] as const;
export type FreshnessSource = (typeof FRESHNESS_SOURCES)[number];
export type FreshnessState = (typeof FRESHNESS_STATES)[number];

const DAY_STATUSES = ['pending', 'running', 'complete', 'failed', 'partial'] as const;
const ROW_OUTCOMES = ['inserted', 'updated', 'unchanged', 'deleted'] as const;
const ENRICH_OUTCOMES = ['done', 'deleted', 'forbidden', 'failed'] as const;

const rows = new Counter({
  name: 'crs_sync_rows_total',
  help: 'Rows a day load of the export wrote, by outcome (inserted, updated, unchanged, deleted: soft-deleted as gone from the source)',
  labelNames: ['source', 'outcome'],
  registers: [registry],
});
const linesRead = new Counter({
  name: 'crs_sync_lines_read_total',
  help: 'Lines holding a record or a rejected record that day loads read (blank lines excluded)',
  labelNames: ['source'],
  registers: [registry],
});
const linesRejected = new Counter({
  name: 'crs_sync_lines_rejected_total',
  help: 'Lines day loads put into the quarantine (rejected_records)',
  labelNames: ['source'],
  registers: [registry],
});
const dayLoads = new Counter({
  name: 'crs_sync_day_loads_total',
  help: 'Day loads that ended in this worker, by outcome (completed; failed: the day ended failed, its load out of retries or not retryable)',
  labelNames: ['outcome'],
  registers: [registry],
});
const enrichThreads = new Counter({
  name: 'crs_sync_enrich_threads_total',
  help: 'Threads enrichment batches finished, by the status each ended in',
  labelNames: ['outcome'],
  registers: [registry],
});
const budgetWait = new Histogram({
  name: 'crs_sync_budget_wait_seconds',
  help: 'How long requests waited for a grant of the shared request budget (waits that ended)',
  buckets: [0.01, 0.1, 0.5, 1, 5, 15, 60, 300],
  registers: [registry],
});
const alertsSent = new Counter({
  name: 'crs_sync_alerts_sent_total',
  help: 'Alert messages delivered to the webhook receivers, by kind and state (firing, resolved)',
  labelNames: ['kind', 'state'],
  registers: [registry],
});

/** Requests waiting for a budget grant right now, by when each began waiting (performance.now()). */
const waiting = new Set<{ since: number }>();
new Gauge({
  name: 'crs_sync_budget_oldest_wait_seconds',
  help: 'How long the request waiting longest for the shared request budget has waited so far (0: none waits)',
  registers: [registry],
  collect() {
    let oldest = Number.POSITIVE_INFINITY;
    for (const w of waiting) oldest = Math.min(oldest, w.since);
    this.set(waiting.size === 0 ? 0 : (performance.now() - oldest) / 1000);
  },
});

for (const outcome of ROW_OUTCOMES) rows.inc({ source: 'export', outcome }, 0);
linesRead.inc({ source: 'export' }, 0);
linesRejected.inc({ source: 'export' }, 0);
for (const outcome of ['completed', 'failed']) dayLoads.inc({ outcome }, 0);
for (const outcome of ENRICH_OUTCOMES) enrichThreads.inc({ outcome }, 0);

/** A day load of the export returned its counts (once per completed activity, whatever its attempts). */
export function countDayLoad(c: Readonly<LoadCounts>): void {
  for (const outcome of ROW_OUTCOMES) rows.inc({ source: 'export', outcome }, c[outcome]);
  linesRead.inc({ source: 'export' }, c.rowsRead);
  linesRejected.inc({ source: 'export' }, c.rejected);
  dayLoads.inc({ outcome: 'completed' });
}

/**
 * A day ended `failed` in the ledger: its load stopped retrying (attempts exhausted, or an error no
 * retry can fix). Once per day that failed, by whoever released it; never for a failed attempt
 * that Temporal retries, nor for an intraday pull (its day stays `partial`).
 */
export function countDayFailed(): void {
  dayLoads.inc({ outcome: 'failed' });
}

/** CRS_OPEN_DAY_STALE_AFTER's default (src/alerts/checks.ts), until the worker sets its own. */
const OPEN_DAY_STALE_AFTER_DEFAULT_SECONDS = 3 * 3600;
const openDayStaleAfter = new Gauge({
  name: 'crs_sync_open_day_stale_after_seconds',
  help: 'CRS_OPEN_DAY_STALE_AFTER of this worker: the open day not pulled for longer is stale (the open_day_stale alert)',
  registers: [registry],
});
openDayStaleAfter.set(OPEN_DAY_STALE_AFTER_DEFAULT_SECONDS);

/** The worker's CRS_OPEN_DAY_STALE_AFTER, which the Prometheus rule compares the open day's age with. */
export function setOpenDayStaleAfter(seconds: number): void {
  openDayStaleAfter.set(seconds);
}

/** An enrichment batch returned its counts. */
export function countEnrichBatch(c: Readonly<Record<(typeof ENRICH_OUTCOMES)[number], number>>): void {
  for (const outcome of ENRICH_OUTCOMES) enrichThreads.inc({ outcome }, c[outcome]);
}

/** The registration point of the alert sender: one delivered message. */
export function countAlertSent(kind: AlertKind, state: 'firing' | 'resolved'): void {
  alertsSent.inc({ kind, state });
}

/** A request begins waiting for a shared budget grant; call the answer when it has one (or gave up). */
export function budgetWaitStarted(): () => void {
  const w = { since: performance.now() };
  waiting.add(w);
  return () => {
    if (!waiting.delete(w)) return;
    budgetWait.observe((performance.now() - w.since) / 1000);
  };
}

export interface FreshnessReading {
  source: FreshnessSource;
  /** Absent when the reader knows only the age (the default reader from the ledger). */
  state?: FreshnessState;
  /** Null when there is nothing to be fresh about yet (no day loaded). */
  ageSeconds: number | null;
}

type Reader<T> = () => Promise<T>;

let warehouseReader: Reader<WarehouseGauges> | undefined;
let freshnessReader: Reader<FreshnessReading[]> | undefined;
let cacheMs = 5_000;
let onReadError: (err: unknown) => void = () => {};

/**
 * Where the gauges come from. Scrapes within `cacheMs` of a read share it, so several
 * Prometheus servers (or a scrape every second) cost one set of queries; a read that fails
 * leaves the warehouse gauges out of that scrape rather than showing old values as current.
 */
export function setWarehouseReader(
  read: Reader<WarehouseGauges> | undefined,
  opts: { cacheMs?: number; onError?: (err: unknown) => void } = {},
): void {
  warehouseReader = read;
  cacheMs = opts.cacheMs ?? 5_000;
  onReadError = opts.onError ?? (() => {});
  cached.clear();
}

/** The registration point of the freshness rule: its per-source state and age replace the default. */
export function setFreshnessReader(read: Reader<FreshnessReading[]> | undefined): void {
  freshnessReader = read;
  cached.clear();
}

const cached = new Map<string, { at: number; value: Promise<unknown> }>();

async function cachedRead<T>(key: string, read: Reader<T> | undefined): Promise<T | undefined> {
  if (!read) return undefined;
  const now = performance.now();
  const hit = cached.get(key);
  if (!hit || now - hit.at > cacheMs) cached.set(key, { at: now, value: read() });
  try {
    return (await cached.get(key)?.value) as T;
  } catch (err) {
    cached.delete(key);
    onReadError(err);
    return undefined;
  }
}

/**
 * A gauge whose values come from a read at scrape time, absent from the scrape when the read
 * gave nothing (prom-client's reset would leave a gauge without labels at 0, which reads as a
 * healthy warehouse).
 */
class ReadGauge extends Gauge {
  read = false;
  override async get() {
    const m = await super.get();
    return this.read ? m : { ...m, values: [] };
  }
}

/** `fill` returns false when the reading has nothing for the gauge: it is left out of the scrape. */
function warehouseGauge(
  name: string,
  help: string,
  labelNames: string[],
  fill: (g: Gauge, w: WarehouseGauges) => boolean | undefined,
): void {
  new ReadGauge({
    name,
    help,
    labelNames,
    registers: [registry],
    async collect() {
      this.reset();
      const w = await cachedRead('warehouse', warehouseReader);
      // A gauge without labels reads 0 after its reset: absent is what says "nothing".
      (this as ReadGauge).read = w !== undefined && fill(this, w) !== false;
    },
  });
}

warehouseGauge('crs_sync_days', 'Days of the ledger (sync_days) by status', ['status'], (g, w) => {
  for (const status of new Set([...DAY_STATUSES, ...Object.keys(w.days)]))
    g.set({ status }, w.days[status] ?? 0);
  return true;
});
warehouseGauge(
  'crs_sync_deletes_held',
  'Rows whose soft-delete the delete guard holds for review (crs-sync deletes)',
  [],
  (g, w) => {
    g.set(w.deletesHeld);
    return true;
  },
);
warehouseGauge(
  'crs_sync_quarantine_open_lines',
  'Quarantined lines not replayed yet, by source and reject code',
  ['source', 'code'],
  (g, w) => {
    for (const q of w.quarantineOpen) g.set({ source: q.source, code: q.code }, q.lines);
    return true;
  },
);
warehouseGauge('crs_sync_enrich_backlog_threads', 'Threads waiting for enrichment', [], (g, w) => {
  g.set(w.enrichBacklog);
  return true;
});
// No day as a label (a series per day): the day is in `crs-sync status`. Absent without an
// intraday pull, as a 0 would read as "pulled just now".
warehouseGauge(
  'crs_sync_open_day_pull_age_seconds',
  'How long ago the open UTC day was last pulled intraday (absent when no day pulled intraday is waiting for its closed-day pull)',
  [],
  (g, w) => {
    if (w.openDayPullAgeSeconds === null) return false;
    g.set(w.openDayPullAgeSeconds);
    return true;
  },
);
// The measures two alerts judge by (docs/alerts.md's table of alerts and rules).
warehouseGauge(
  'crs_sync_day_rejected_share_max',
  "The highest share of its lines read that a day's last load rejected (over the ledger's days; the quarantine_spike alert's measure)",
  [],
  (g, w) => {
    g.set(w.dayRejectedShareMax);
    return true;
  },
);
warehouseGauge(
  'crs_sync_budget_paused_seconds',
  "How long from now the shared request budget stays paused by the service's Retry-After (the longest of the budgets; 0: none; the budget_starved alert's measure)",
  [],
  (g, w) => {
    g.set(w.budgetPausedSeconds);
    return true;
  },
);
warehouseGauge(
  'crs_sync_enrich_oldest_pending_seconds',
  'How long the thread waiting longest for enrichment has waited (0: none waits)',
  [],
  (g, w) => {
    g.set(w.enrichOldestPendingSeconds);
    return true;
  },
);

new Gauge({
  name: 'crs_sync_freshness_age_seconds',
  help: 'Age of the data per source: the export from the end of the newest day known complete, the enrichment from its oldest pending thread',
  labelNames: ['source'],
  registers: [registry],
  async collect() {
    this.reset();
    for (const f of (await freshness()) ?? [])
      if (f.ageSeconds !== null) this.set({ source: f.source }, f.ageSeconds);
  },
});
new Gauge({
  name: 'crs_sync_freshness_state',
  help: 'Freshness state per source: 1 for the current state (on_time, late, failing, no_data: no day complete yet and none due yet), 0 for the others',
  labelNames: ['source', 'state'],
  registers: [registry],
  async collect() {
    this.reset();
    for (const f of (await freshness()) ?? []) {
      if (!f.state) continue;
      for (const state of FRESHNESS_STATES) this.set({ source: f.source, state }, state === f.state ? 1 : 0);
    }
  },
});

/**
 * The default freshness until the freshness rule of the alerts is registered: the ages from the
 * ledger, each `late` past 26 h (the daily schedule plus its margin), never `failing`.
 */
export const DEFAULT_FRESHNESS_SLA_SECONDS = 26 * 3600;

/** The registered reader's, else the default from the warehouse reader's ages. */
function freshness(): Promise<FreshnessReading[] | undefined> {
  return cachedRead('freshness', freshnessReader ?? defaultFreshness());
}

function defaultFreshness(): Reader<FreshnessReading[]> | undefined {
  const read = warehouseReader;
  if (!read) return undefined;
  const reading = (source: FreshnessSource, ageSeconds: number | null): FreshnessReading => ({
    source,
    ageSeconds,
    ...(ageSeconds === null
      ? {}
      : { state: ageSeconds > DEFAULT_FRESHNESS_SLA_SECONDS ? 'late' : 'on_time' }),
  });
  return async () => {
    const w = await cachedRead('warehouse', read);
    if (!w) return [];
    return [reading('export', w.exportAgeSeconds), reading('enrichment', w.enrichOldestPendingSeconds)];
  };
}

export interface SchemaDriftCount {
  source: string;
  /**
   * What drifted: a new field, a missing one, a changed JSON type (the drift record's kind; the
   * label is `drift`, as the alerts' own label `kind` names the alert).
   */
  drift: string;
  /** Drifts recorded (field paths), first seen at any time. */
  drifts: number;
  /** Of them, those not accepted yet (what the schema_drift alert is open for). */
  open: number;
}

let driftReader: Reader<SchemaDriftCount[]> | undefined;

/** The registration point of schema drift detection: the drifts it recorded, by source and kind. */
export function setSchemaDriftReader(read: Reader<SchemaDriftCount[]> | undefined): void {
  driftReader = read;
  cached.clear();
}

new Gauge({
  name: 'crs_sync_schema_drifts_open',
  help: 'Schema drifts not accepted yet (crs-sync schema accept), by source and drift kind: the schema_drift alert is open while one is',
  labelNames: ['source', 'drift'],
  registers: [registry],
  async collect() {
    this.reset();
    for (const d of (await cachedRead('drift', driftReader)) ?? [])
      this.set({ source: d.source, drift: d.drift }, d.open);
  },
});

new Gauge({
  name: 'crs_sync_schema_drifts',
  help: 'Schema drifts recorded (field paths that differ from the known contract), by source and drift kind',
  labelNames: ['source', 'drift'],
  registers: [registry],
  async collect() {
    this.reset();
    for (const d of (await cachedRead('drift', driftReader)) ?? [])
      this.set({ source: d.source, drift: d.drift }, d.drifts);
  },
});

collectDefaultMetrics({ register: registry });

/** The exposition of every series of the registry (Prometheus text format 0.0.4). */
export function pipelineMetricsText(): Promise<string> {
  return registry.metrics();
}

/**
 * Names of the series an exposition declares (`# TYPE` lines), histograms and summaries with the
 * series their samples carry: what a rule's expression may name.
 */
export function seriesNamesOf(exposition: string): string[] {
  const names = new Set<string>();
  for (const m of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name = '', kind] = m;
    if (kind === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(name + s);
    else if (kind === 'summary') for (const s of ['', '_sum', '_count']) names.add(name + s);
    else names.add(name);
  }
  return [...names].sort();
}
