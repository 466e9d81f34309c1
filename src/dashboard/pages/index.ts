/**
 * The dashboard's five pages, one file each: which queries each runs (its sections) and how their
 * results are shown. A page is rendered from a `PageData` (what the JSON endpoint returns as well),
 * in which each section either holds its rows or the error its query met, so one broken query
 * shows an error panel and leaves the rest of the page standing. What the pages share is in
 * shared.ts.
 */

import { citations } from './citations.ts';
import { health } from './health.ts';
import type { PageDef, PageName } from './shared.ts';
import { threads } from './threads.ts';
import { usage } from './usage.ts';
import { users } from './users.ts';

export type { ChartSpec, PageData, PageDef, PageName, SectionResult } from './shared.ts';

export const PAGES: Readonly<Record<PageName, PageDef>> = { usage, users, threads, citations, health };
export const PAGE_ORDER: PageName[] = ['usage', 'users', 'threads', 'citations', 'health'];
