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
  return new GroupCommitWriter(
    pool,
    opts.maxInFlight ?? DEFAULT_WRITES_IN_FLIGHT,
    opts.maxPages ?? DEFAULT_PAGES_PER_WRITE,
  );
}

class GroupCommitWriter implements PageWriter {
  readonly #pool: Pick<pg.Pool, 'query'>;
  readonly #maxInFlight: number;
  readonly #maxPages: number;
  readonly #queue: Waiting[] = [];
  #inFlight = 0;

  constructor(pool: Pick<pg.Pool, 'query'>, maxInFlight: number, maxPages: number) {
    this.#pool = pool;
    this.#maxInFlight = maxInFlight;
    this.#maxPages = maxPages;
  }

  write(page: PageWrite): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#queue.push({ page, resolve, reject });
      this.#pump();
    });
  }

  /** The waiting pages that can share a statement, oldest first; a page that clashes waits. */
  #take(): Waiting[] {
    const queue = this.#queue;
    const keys = new Set<string>();
    const group: Waiting[] = [];
    for (let i = 0; i < queue.length && group.length < this.#maxPages; ) {
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

  async #run(group: Waiting[]): Promise<void> {
    const pool = this.#pool;
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

  #pump(): void {
    while (this.#inFlight < this.#maxInFlight && this.#queue.length > 0) {
      const group = this.#take();
      this.#inFlight++;
      void this.#run(group).finally(() => {
        this.#inFlight--;
        this.#pump();
      });
    }
  }
}
