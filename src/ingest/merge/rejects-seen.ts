import type { PendingReject } from './pending.ts';
import type { SeenSpill } from './seen-spill.ts';

/**
 * What a load's quarantined lines tell its delete step and the held deletes (finalize.ts
 * `settleHeld`): the id of each that has a readable one, noted with the ids of its records
 * (`load_seen`: its row is in the source, so not deleted for its absence), and the days of those
 * whose id cannot be read (any row of such a day may be that line's).
 *
 * Gathered as the lines are read, not read back from the quarantine: a line that several loads
 * read is one reject row, whose last load may be another by the time this one ends (an import
 * interrupted, another run, this one resumed). Every attempt of a load reads its whole source
 * again, and the router notes a reject before it skips a line an earlier attempt committed, so
 * this is the whole load's however often it resumed. A line noted twice (a batch merged again,
 * a line held twice) changes nothing.
 */
export class RejectsSeen {
  /** Days of quarantined lines whose message id cannot be read. */
  readonly unreadableDays = new Set<string>();
  /** A quarantined line whose id and day both cannot be read: it may be of any day. */
  unreadableAnyDay = false;
  /** A quarantined line whose day cannot be read (its id may be of any day's row). */
  dayless = false;
  private readonly seen: SeenSpill | null;

  /** `seen`: the load's ids (null when it does not note them: nothing can be deleted then). */
  constructor(seen: SeenSpill | null) {
    this.seen = seen;
  }

  note(rej: PendingReject): void {
    if (rej.day === null) this.dayless = true;
    if (rej.messageId !== null) this.seen?.add(rej.messageId);
    else if (rej.day === null) this.unreadableAnyDay = true;
    else this.unreadableDays.add(rej.day);
  }
}
