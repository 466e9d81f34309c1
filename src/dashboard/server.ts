/**
 * The dashboard's HTTP server (node:http, no framework): five server-rendered pages, the same
 * data as JSON, and the static files it needs, uPlot among them, read from node_modules so that
 * nothing is fetched from the network.
 *
 *   GET /usage | /users | /threads | /citations | /health   ?from=YYYY-MM-DD&to=YYYY-MM-DD
 *   GET /api/<page>?from=…&to=…     the page's data as JSON (what the page shows, unformatted)
 *   GET /healthz                    200 "ok" while the server is up (not a warehouse check)
 *   GET /assets/…                   uPlot, the page script and style
 *
 * Read-only by construction: each request runs its queries in one `read only` transaction
 * (repeatable read, so every figure of a page comes from the same snapshot), each query under a
 * savepoint so that one failing query becomes that section's error panel and the others still
 * show. Only GET and HEAD are answered.
 *
 * Held against other origins (access.ts: Host, Origin, a token off loopback) and against absurd
 * requests: a page's per-day queries read the range cut to the days with data (range.ts
 * `clampToData`), each statement is bounded (`statementTimeoutMs`), a request whose client went
 * away has its statement cancelled (cancel.ts), and a request that finds the connections all in
 * use is answered "busy" at once, one connection being kept for the health page.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type pg from 'pg';
import type { Logger } from '../log.ts';
import { redactText } from '../log.ts';
import { dbFailureKind } from '../warehouse/db-errors.ts';
import {
  beginReadSnapshot,
  type DataExtent,
  dataExtent,
  dataSpan,
  endReadSnapshot,
  type Queryable,
  readSource,
  type Source,
  savepoint,
} from '../warehouse/read/index.ts';
import { type AccessRules, accessRules, refusal } from './access.ts';
import { cancelRunning } from './cancel.ts';
import { errorPanel, esc } from './html.ts';
import { PAGE_ORDER, PAGES, type PageData, type PageName, type SectionResult } from './pages/index.ts';
import { clampToData, presets, resolveRange } from './range.ts';

/** The port `crs-sync dashboard` (and `crs-sync demo --keep`) listens on unless told otherwise. */
export const DEFAULT_DASHBOARD_PORT = 8787;

export interface DashboardOptions {
  /** The warehouse's pool (Warehouse.pool): its search_path is the schema. */
  pool: pg.Pool;
  host?: string;
  /** 0: any free port. */
  port?: number;
  log?: Logger;
  /** Where the warehouse is, shown in the footer (host and database, never a password). */
  warehouse?: string;
  /** Per-query bound, ms: a query past it is cancelled and its section says so. */
  statementTimeoutMs?: number;
  /**
   * Required of every request (bearer token, or basic auth's password) but /healthz; the CLI
   * requires one when the address is not loopback (access.ts).
   */
  token?: string;
  /** Host values accepted besides the bound address (`name` or `name:port`): access.ts. */
  allowedHosts?: string[];
}

/** Each statement's bound unless told otherwise: a page's queries take milliseconds. */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 10_000;
/** Seconds a "busy" answer asks the client to wait (Retry-After). */
const BUSY_RETRY_AFTER_S = 5;

export interface Dashboard {
  /** http://host:port (the address to open; on a wildcard bind, this machine's loopback). */
  url: string;
  /** The address and port actually bound (`0.0.0.0:8787`, `[::1]:8787`). */
  listening: string;
  close(): Promise<void>;
}

const require = createRequire(import.meta.url);
const STATIC_DIR = path.join(import.meta.dirname, 'static');

interface Asset {
  type: string;
  body: Buffer;
}

/** Read once at start: a few tens of KB. */
function loadAssets(): Map<string, Asset> {
  const files: [string, string, string][] = [
    ['uPlot.iife.min.js', require.resolve('uplot/dist/uPlot.iife.min.js'), 'text/javascript'],
    ['uPlot.min.css', require.resolve('uplot/dist/uPlot.min.css'), 'text/css'],
    ['dashboard.js', path.join(STATIC_DIR, 'dashboard.js'), 'text/javascript'],
    ['dashboard.css', path.join(STATIC_DIR, 'dashboard.css'), 'text/css'],
  ];
  return new Map(
    files.map(([name, file, type]) => [name, { type: `${type}; charset=utf-8`, body: readFileSync(file) }]),
  );
}

/** The reason a query failed, in words for the page, with no secret in it. */
export function describeFailure(err: unknown): { unreachable: boolean; message: string } {
  const e = err as { message?: unknown; code?: unknown };
  const msg = redactText(typeof e?.message === 'string' && e.message ? e.message : String(err));
  const kind = dbFailureKind(err);
  if (kind === 'connection') return { unreachable: true, message: `cannot reach the warehouse: ${msg}` };
  if (kind === 'timeout')
    return { unreachable: false, message: `the query was stopped by the warehouse: ${msg}` };
  if (e?.code === '42P01' || e?.code === '42703') {
    return {
      unreachable: false,
      message: `${msg} (the warehouse schema is missing it: is it migrated? crs-sync migrate brings it up to date)`,
    };
  }
  return { unreachable: false, message: msg };
}

class Unreachable extends Error {}

interface Loaded {
  status: number;
  data?: PageData;
  error?: string;
  queryMs: number;
  /** Answered "busy": sent with Retry-After. */
  busy?: boolean;
}

class Aborted extends Error {}

/**
 * The connections the pages may hold at once: all of the pool's but one, which only the health
 * page may take, so that "is the sync current?" is answered while wide ranges keep the others.
 * A request past the limit is answered busy at once rather than queued behind the pool's wait.
 */
class Connections {
  private used = 0;
  readonly max: number;
  constructor(max: number) {
    this.max = max;
  }
  take(health: boolean): boolean {
    const limit = health || this.max <= 1 ? this.max : this.max - 1;
    if (this.used >= limit) return false;
    this.used++;
    return true;
  }
  give(): void {
    this.used--;
  }
}

function busy(c: Connections, queryMs: number): Loaded {
  return {
    status: 503,
    busy: true,
    error:
      `busy: the dashboard's connections to the warehouse (${c.max}, one kept for the health page) are all ` +
      `in use by other requests; try again in ${BUSY_RETRY_AFTER_S} seconds`,
    queryMs,
  };
}

/**
 * Whether the pool could hand out a connection without a wait: an idle one, or room for a new one.
 * Only a pool shared with others fills past the dashboard's own count (Connections).
 */
function poolHasRoom(pool: pg.Pool, max: number): boolean {
  return pool.idleCount > 0 || pool.totalCount < max;
}

interface RequestContext {
  connections: Connections;
  /** Aborted when the client goes away before its answer is sent. */
  signal: AbortSignal;
}

/**
 * Runs a page's queries in one read-only snapshot; see the module comment. Long: the life of one
 * held connection, from taking it to giving it back; its cancellation, its savepoints and its
 * release share that connection and the one finally that must always run.
 */
async function loadPage(
  opts: DashboardOptions,
  rc: RequestContext,
  name: PageName,
  params: URLSearchParams,
): Promise<Loaded> {
  const started = performance.now();
  const page = PAGES[name];
  // The range's form first: a request that is not one costs no connection.
  const asked = resolveRange(params, { firstDay: null, lastDay: null });
  if (!asked.ok) return { status: 400, error: `the date range is not valid: ${asked.error}`, queryMs: 0 };
  if (!poolHasRoom(opts.pool, rc.connections.max) || !rc.connections.take(name === 'health')) {
    return busy(rc.connections, 0);
  }
  let held: pg.PoolClient;
  try {
    // With room in the pool this waits only for a new connection to be made: a warehouse slow to
    // accept one is then told apart from a busy dashboard (the pool's own timeout says so).
    held = await opts.pool.connect();
  } catch (err) {
    rc.connections.give();
    return { status: 503, error: describeFailure(err).message, queryMs: performance.now() - started };
  }
  // A client gone away: its running statement is cancelled, and no other one starts.
  let cancelled: Promise<void> | undefined;
  const onAbort = () => {
    cancelled = cancelRunning(held);
  };
  rc.signal.addEventListener('abort', onAbort, { once: true });
  // What the sections query through: nothing new starts once the client has gone.
  const q: Queryable = {
    query: (text, values) =>
      rc.signal.aborted ? Promise.reject(new Aborted('the client went away')) : held.query(text, values),
  };
  let broken: unknown;
  try {
    await beginReadSnapshot(q, opts.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS);
    let n = 0;
    const run = async (fn: () => Promise<unknown>): Promise<SectionResult> => {
      const sp = n++;
      await savepoint.open(q, sp);
      try {
        const data = await fn();
        await savepoint.release(q, sp);
        return { ok: true, data };
      } catch (err) {
        if (rc.signal.aborted) throw new Aborted('the client went away');
        const f = describeFailure(err);
        if (f.unreachable) throw new Unreachable(f.message);
        await savepoint.rollback(q, sp);
        opts.log?.warn({ page: name, error: f.message }, 'a dashboard query failed');
        return { ok: false, error: f.message };
      }
    };
    // The one rule of every reader (readSource): the rollups when they are current in this
    // snapshot, the raw rows of the marked days only while a refresh is due, the raw tables while
    // a rebuild is pending or on a schema that predates the rollups.
    const chosen = await run(() => readSource(q));
    const source: Source = chosen.ok ? (chosen.data as Source) : 'raw';
    const ext = await run(() => dataExtent(q, source));
    const extent = ext.ok ? (ext.data as DataExtent) : null;
    const range = resolveRange(params, extent);
    if (!range.ok) return { status: 400, error: `the date range is not valid: ${range.error}`, queryMs: 0 };
    // The ranged pages read the range cut to the days that can hold data: their per-day work
    // then follows the data whatever the range (range.ts clampToData).
    let dataRange = range.range;
    if (page.ranged) {
      const span = extent ? await run(() => dataSpan(q, extent, source)) : null;
      dataRange = clampToData(range.range, span?.ok ? (span.data as DataExtent) : null);
    }
    const sections: Record<string, SectionResult> = ext.ok ? {} : { extent: ext };
    for (const [key, fn] of Object.entries(page.sections)) {
      sections[key] = await run(() => fn(q, dataRange, source));
    }
    return {
      status: 200,
      data: { page: name, range: range.range, dataRange, source, extent, sections },
      queryMs: performance.now() - started,
    };
  } catch (err) {
    broken = err;
    const message = err instanceof Unreachable ? err.message : describeFailure(err).message;
    return { status: 503, error: message, queryMs: performance.now() - started };
  } finally {
    rc.signal.removeEventListener('abort', onAbort);
    if (rc.signal.aborted) {
      // Dropped, not reused: a cancel still on its way must not stop the next request's query.
      await cancelled;
      held.release(true);
    } else {
      // Nothing to keep (read only): the transaction is rolled back. A client whose transaction
      // could not be ended is dropped rather than handed to the next request.
      if (!broken)
        broken = await endReadSnapshot(held).then(
          () => undefined,
          (err: unknown) => err,
        );
      held.release(broken ? true : undefined);
    }
    rc.connections.give();
  }
}

/** What the footer says the figures were read from (readSource's choice). */
const SOURCE_TEXT: Record<Source, string> = {
  rollup: 'the rollups',
  mixed: 'the rollups and the raw rows of the days a load marked (a rollup refresh is due)',
  raw: 'the raw tables (a rollup rebuild is due)',
};

function layout(
  opts: DashboardOptions,
  name: PageName | null,
  params: URLSearchParams,
  main: string,
  extra: {
    data?: PageData;
    charts?: unknown;
    queryMs?: number;
  },
): string {
  const q = new URLSearchParams();
  const range = extra.data?.range;
  if (range) {
    q.set('from', range.from);
    q.set('to', range.to);
  } else {
    for (const k of ['from', 'to']) {
      const v = params.get(k);
      if (v) q.set(k, v);
    }
  }
  const qs = q.toString() ? `?${q}` : '';
  const nav = PAGE_ORDER.map(
    (p) => `<a href="/${p}${qs}"${p === name ? ' aria-current="page"' : ''}>${esc(PAGES[p].title)}</a>`,
  ).join('');
  const page = name ? PAGES[name] : null;
  const form = range
    ? `<form class="range" method="get" action="/${name}">
  <label>From <input type="date" name="from" value="${esc(range.from)}" required></label>
  <label>To <input type="date" name="to" value="${esc(range.to)}" required></label>
  <button type="submit">Apply</button>
  <span class="presets">${presets(extra.data?.extent ?? null)
    .map((p) => `<a href="/${name}?from=${p.range.from}&amp;to=${p.range.to}">${esc(p.label)}</a>`)
    .join(' · ')}</span>
</form>`
    : '';
  // JSON in a non-executed script element; '<' escaped so no value can close the element.
  const chartJson = JSON.stringify(extra.charts ?? {}).replace(/</g, '\\u003c');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(page ? `${page.title} · ` : '')}crs-sync dashboard</title>
<link rel="stylesheet" href="/assets/uPlot.min.css">
<link rel="stylesheet" href="/assets/dashboard.css">
</head>
<body data-page="${esc(name ?? '')}">
<header>
  <div class="brand">crs-sync</div>
  <nav>${nav}</nav>
</header>
<main>
<h1>${esc(page?.title ?? 'crs-sync dashboard')}</h1>
${page ? `<p class="about">${esc(page.about)}</p>` : ''}
${page?.ranged === false && range ? `<p class="about">Date range (for the list of days):</p>` : ''}
${form}
${main}
</main>
<footer>Read-only view of ${esc(opts.warehouse ?? 'the warehouse')}${
    extra.queryMs !== undefined
      ? ` · queries <span data-query-ms="${Math.round(extra.queryMs)}">${Math.round(extra.queryMs)} ms</span>`
      : ''
  }${
    extra.data
      ? ` · figures from <span data-source="${extra.data.source}">${SOURCE_TEXT[extra.data.source]}</span>`
      : ''
  } · data as JSON: <a href="/api/${esc(name ?? 'usage')}${qs}">/api/${esc(name ?? 'usage')}</a></footer>
<script type="application/json" id="chart-data">${chartJson}</script>
<script src="/assets/uPlot.iife.min.js"></script>
<script src="/assets/dashboard.js"></script>
</body>
</html>
`;
}

const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  // The same for browsers that predate frame-ancestors: no other page may frame this one.
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

function send(
  res: http.ServerResponse,
  status: number,
  type: string,
  body: string | Buffer,
  head: boolean,
  extra = {},
) {
  res.writeHead(status, { 'content-type': type, ...SECURITY_HEADERS, ...extra });
  res.end(head ? undefined : body);
}

/** The address as the server reads it, or why it is not one (a 400 says so). */
function parseAddress(raw: string): { url: URL } | { error: string } {
  let url: URL;
  try {
    url = new URL(raw, 'http://dashboard.invalid');
  } catch {
    return { error: `the address ${JSON.stringify(raw.slice(0, 200))} is not a URL path` };
  }
  // URLSearchParams reads a broken %-escape as text: it would pass for a value it is not.
  const parts = [url.pathname, ...url.search.slice(1).split(/[&=]/)];
  for (const part of parts) {
    try {
      decodeURIComponent(part);
    } catch {
      return { error: `the address has a malformed percent-encoding: ${JSON.stringify(part.slice(0, 200))}` };
    }
  }
  return { url };
}

interface ServerState {
  assets: Map<string, Asset>;
  /** Set once the server listens (the port is known then). */
  rules?: AccessRules;
  connections: Connections;
}

/**
 * Long: one request's way through the server, each refusal (access, method, address) then each
 * route in the order they are tried; a route is a few lines.
 */
async function handle(
  opts: DashboardOptions,
  st: ServerState,
  req: http.IncomingMessage,
  res: http.ServerResponse,
) {
  const head = req.method === 'HEAD';
  const parsed = parseAddress(req.url ?? '/');
  const path = 'url' in parsed ? parsed.url.pathname : '';
  const refused = st.rules ? refusal(st.rules, req, path) : null;
  if (refused) {
    return send(
      res,
      refused.status,
      'text/plain; charset=utf-8',
      `${refused.message}\n`,
      head,
      refused.headers,
    );
  }
  if (req.method !== 'GET' && !head) {
    send(res, 405, 'text/plain; charset=utf-8', 'the dashboard is read-only: GET and HEAD only\n', false, {
      allow: 'GET, HEAD',
    });
    return;
  }
  if ('error' in parsed) {
    if ((req.url ?? '').startsWith('/api/')) {
      return send(res, 400, 'application/json; charset=utf-8', JSON.stringify({ error: parsed.error }), head);
    }
    const body = layout(opts, null, new URLSearchParams(), errorPanel('page', parsed.error), {});
    return send(res, 400, 'text/html; charset=utf-8', body, head);
  }
  const { url } = parsed;
  const p = url.pathname;
  if (p === '/' || p === '/index.html') {
    res.writeHead(302, { location: `/usage${url.search}`, ...SECURITY_HEADERS });
    res.end();
    return;
  }
  if (p === '/healthz') return send(res, 200, 'text/plain; charset=utf-8', 'ok\n', head);
  if (p.startsWith('/assets/')) {
    const a = st.assets.get(p.slice('/assets/'.length));
    if (a) return send(res, 200, a.type, a.body, head, { 'cache-control': 'max-age=300' });
  }
  const api = p.startsWith('/api/');
  const name = (api ? p.slice('/api/'.length).replace(/\.json$/, '') : p.slice(1)) as PageName;
  if ((api || p === '/api') && !PAGE_ORDER.includes(name)) {
    // A script reading /api/ parses what it gets: an unknown address answers JSON too.
    const body = JSON.stringify({ error: 'not found', path: p, pages: PAGE_ORDER.map((x) => `/api/${x}`) });
    return send(res, 404, 'application/json; charset=utf-8', body, head);
  }
  if (!PAGE_ORDER.includes(name)) {
    const body = layout(
      opts,
      null,
      url.searchParams,
      errorPanel('page', `there is no page ${p}: the pages are ${PAGE_ORDER.map((x) => `/${x}`).join(', ')}`),
      {},
    );
    return send(res, 404, 'text/html; charset=utf-8', body, head);
  }
  // The client's going away (before the answer is complete) stops the request's queries.
  const gone = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) gone.abort();
  };
  res.once('close', onClose);
  const loaded = await loadPage(
    opts,
    { connections: st.connections, signal: gone.signal },
    name,
    url.searchParams,
  );
  if (gone.signal.aborted) return;
  res.off('close', onClose);
  res.setHeader('server-timing', `db;dur=${loaded.queryMs.toFixed(1)}`);
  const extra = loaded.busy ? { 'retry-after': String(BUSY_RETRY_AFTER_S) } : {};
  if (api) {
    const body = loaded.data ? JSON.stringify(loaded.data) : JSON.stringify({ error: loaded.error });
    return send(res, loaded.status, 'application/json; charset=utf-8', body, head, extra);
  }
  if (!loaded.data) {
    const body = layout(opts, name, url.searchParams, errorPanel('page', loaded.error ?? 'unknown error'), {
      queryMs: loaded.queryMs,
    });
    return send(res, loaded.status, 'text/html; charset=utf-8', body, head, extra);
  }
  const { html, charts } = PAGES[name].render(loaded.data);
  const body = layout(opts, name, url.searchParams, html, {
    data: loaded.data,
    charts,
    queryMs: loaded.queryMs,
  });
  return send(res, 200, 'text/html; charset=utf-8', body, head);
}

/** The most connections the pool hands out (pg.Pool's `max`; 10 when not set). */
function poolSize(pool: pg.Pool): number {
  const max = (pool as unknown as { options?: { max?: number } }).options?.max;
  return typeof max === 'number' && max > 0 ? max : 10;
}

export async function startDashboard(opts: DashboardOptions): Promise<Dashboard> {
  const st: ServerState = { assets: loadAssets(), connections: new Connections(poolSize(opts.pool)) };
  const server = http.createServer((req, res) => {
    handle(opts, st, req, res).catch((err: unknown) => {
      const message = describeFailure(err).message;
      opts.log?.error({ error: message }, 'dashboard request failed');
      if (!res.headersSent)
        send(res, 500, 'text/plain; charset=utf-8', `internal error: ${message}\n`, false);
      else res.destroy();
    });
  });
  const host = opts.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  st.rules = accessRules({ host, port: addr.port, allowedHosts: opts.allowedHosts, token: opts.token });
  const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${shown}:${addr.port}`,
    listening: `${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
