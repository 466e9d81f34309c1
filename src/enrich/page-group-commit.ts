import type pg from 'pg';
import { itemAt } from '../common/checked.ts';
import { type PageWrite, pageKeys, writePages } from './page-rows.ts';

/**
 * Writes history pages for every batch of a worker, grouping the pages that wait into one
 * statement: a page arriving while `maxInFlight` statements run goes with the next group instead
 * of taking a round trip (and a commit) of its own. An idle writer writes a page at once, so
 * grouping adds no wait; it only appears when the warehouse is the slower side.
 */
export interface PageWriter {
  /** Resolves when the page is committed; rejects with the warehouse's error for this page. */
  write(page: PageWrite): Promise<void>;
}

// One statement at a time, the classic group commit: pages that arrive meanwhile share the next
// one. Each statement holds one pooled connection, so enrichment also leaves the rest to the loader.
export const DEFAULT_WRITES_IN_FLIGHT = 1;
// Bounds one statement (a page is some tens of kB of JSON; 32 of them about 1 MB).
export const DEFAULT_PAGES_PER_WRITE = 32;

interface Waiting {
  page: PageWrite;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export function createPageWriter(
  pool: Pick<pg.Pool, 'query'>,
  opts: { maxInFlight?: number; maxPages?: number } = {},
): PageWriter {
  const maxInFlight = opts.maxInFlight ?? DEFAULT_WRITES_IN_FLIGHT;
  const maxPages = opts.maxPages ?? DEFAULT_PAGES_PER_WRITE;
  const queue: Waiting[] = [];
  let inFlight = 0;

  /** The waiting pages that can share a statement, oldest first; a page that clashes waits. */
  function take(): Waiting[] {
    const keys = new Set<string>();
    const group: Waiting[] = [];
    for (let i = 0; i < queue.length && group.length < maxPages; ) {
      const k = pageKeys(itemAt(queue, i).page);
      if (k.some((x) => keys.has(x))) {
        i++;
        continue;
      }
      for (const x of k) keys.add(x);
      group.push(itemAt(queue.splice(i, 1), 0));
    }
    return group;
  }

  async function run(group: Waiting[]): Promise<void> {
    try {
      await writePages(
        pool,
        group.map((w) => w.page),
      );
      for (const w of group) w.resolve();
    } catch (err) {
      if (group.length === 1) {
        itemAt(group, 0).reject(err);
        return;
      }
      // One page's failure must stay its own (its thread's batch stops, the others go on): the
      // group is written again page by page.
      await Promise.all(group.map((w) => writePages(pool, [w.page]).then(w.resolve, w.reject)));
    }
  }

  function pump(): void {
    while (inFlight < maxInFlight && queue.length > 0) {
      const group = take();
      inFlight++;
      void run(group).finally(() => {
        inFlight--;
        pump();
      });
    }
  }

  return {
    write(page) {
      return new Promise<void>((resolve, reject) => {
        queue.push({ page, resolve, reject });
        pump();
      });
    },
  };
}
