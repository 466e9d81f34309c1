/**
 * How long a dashboard page takes to load in headless Chromium: for the README's figure and for
 * the BI bench, which calls `measurePageLoads` against a dashboard over its large warehouse.
 *
 * It drives the machine's Chromium (Debian's `chromium` package; `CHROMIUM_PATH` names another)
 * with puppeteer-core, a development dependency: never a browser download. A page's time is from
 * the start of navigation to the end of its load event plus the drawing of its charts (the page
 * script marks `body[data-charts-drawn]`), i.e. until a person sees the whole page.
 */
import { accessSync, constants } from 'node:fs';
import type { Browser } from 'puppeteer-core';

const CANDIDATES = [
  '/usr/bin/chromium',
  '/usr/bin/chromium-browser',
  '/usr/bin/google-chrome',
  '/snap/bin/chromium',
];

/** The Chromium to drive, or an error that says how to get one. */
export function findChromium(env: NodeJS.ProcessEnv = process.env): string {
  const named = env.CHROMIUM_PATH;
  for (const p of named ? [named] : CANDIDATES) {
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {}
  }
  throw new Error(
    named
      ? `CHROMIUM_PATH=${named} is not an executable file`
      : `no Chromium found (looked at ${CANDIDATES.join(', ')}): install Debian's package ` +
          '(apt-get install -y chromium; .ci/run does it) or set CHROMIUM_PATH',
  );
}

/** Headless Chromium as tests and the bench run it (as root, the sandbox cannot start). */
export async function launchChromium(executablePath = findChromium()): Promise<Browser> {
  const { default: puppeteer } = await import('puppeteer-core');
  return puppeteer.launch({
    executablePath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--hide-scrollbars'],
    defaultViewport: { width: 1280, height: 900 },
  });
}

export interface PageLoad {
  page: string;
  /** Median over the runs, ms. */
  ms: number;
  runs: number[];
  /** The server's own time in the warehouse for the last run (Server-Timing), ms. */
  dbMs: number | null;
}

/**
 * Loads each page `runs` times (after one unmeasured load that warms the browser and the
 * database's cache) and returns the median time of each. `query`: the range, e.g.
 * `from=2026-01-01&to=2026-01-31` (default: the page's own default range).
 */
export async function measurePageLoads(opts: {
  baseUrl: string;
  pages?: string[];
  query?: string;
  runs?: number;
  browser?: Browser;
}): Promise<PageLoad[]> {
  const pages = opts.pages ?? ['usage', 'users', 'threads', 'citations', 'health'];
  const runs = Math.max(1, opts.runs ?? 5);
  const browser = opts.browser ?? (await launchChromium());
  const out: PageLoad[] = [];
  try {
    const tab = await browser.newPage();
    for (const name of pages) {
      const url = `${opts.baseUrl}/${name}${opts.query ? `?${opts.query}` : ''}`;
      const times: number[] = [];
      let dbMs: number | null = null;
      for (let i = 0; i <= runs; i++) {
        const t0 = performance.now();
        const res = await tab.goto(url, { waitUntil: 'load' });
        await tab.waitForSelector('body[data-charts-drawn]');
        const ms = performance.now() - t0;
        if (!res?.ok()) throw new Error(`${url} answered ${res?.status() ?? 'nothing'}`);
        const timing = /dur=([\d.]+)/.exec(res.headers()['server-timing'] ?? '');
        dbMs = timing ? Number(timing[1]) : null;
        if (i > 0) times.push(ms);
      }
      const sorted = [...times].sort((a, b) => a - b);
      out.push({ page: name, ms: sorted[Math.floor(sorted.length / 2)] ?? 0, runs: times, dbMs });
    }
    await tab.close();
  } finally {
    if (!opts.browser) await browser.close();
  }
  return out;
}
