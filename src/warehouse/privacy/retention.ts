import type pg from 'pg';
import { shiftDay, utcDay } from '../../common/civil-date.ts';
import { refreshRollups } from '../rollups/refresh.ts';

/**
 * Text retention (CRS_TEXT_RETENTION_DAYS, docs/privacy.md): the words of a conversation are kept
 * N days; after that they are cleared and the rows stay. What is cleared, and by which age:
 *
 * - export rows (`input`, `response` become ''): by their UTC day, `message_date`;
 * - history entries (`text` null, `raw` '{}', the entry as received, which holds the text too):
 *   by `created_at`, or when the service gave none, when the entry was loaded;
 * - artifacts (`val`, `val_json` null, `raw` '{}') and citation `summary`s: by the age of the
 *   history entry they belong to, or when they were loaded.
 *
 * Every figure stays as it was: the rollups and views count rows and read `response_chars` (the
 * loader's count of the response's characters), `is_cancelled` and the ids, none of which change;
 * `record_hash` stays, so a re-pull of the same record is unchanged and writes nothing back.
 * The triggers still mark what the updates touch, and the refresh in the same transaction finds
 * the same figures.
 */

export interface RetentionResult {
  dryRun: boolean;
  /** Text of rows before this UTC day is cleared (today minus the retention). */
  before: string;
  /** Rows whose text was cleared (or, in a dry run, would be), per table. */
  rows: Record<string, number>;
}

/** The age of a history entry (`m`): when it was written, else when it was loaded. */
const ENTRY_AGE = 'coalesce(m.created_at, m._loaded_at)';

const SWEEPS: readonly { table: string; set: string; where: string }[] = [
  {
    table: 'analytics_messages',
    set: `input = '', response = ''`,
    where: `message_date < $1::date and (input <> '' or response <> '')`,
  },
  {
    table: 'thread_messages m',
    set: `text = null, raw = '{}'::jsonb`,
    where: `${ENTRY_AGE} < $1::date and (m.text is not null or m.raw <> '{}'::jsonb)`,
  },
  {
    table: 'artifacts a',
    set: `val = null, val_json = null, raw = '{}'::jsonb`,
    where: `(a.val is not null or a.val_json is not null or a.raw <> '{}'::jsonb)
      and coalesce((select ${ENTRY_AGE} from thread_messages m where m.message_id = a.message_id), a._loaded_at) < $1::date`,
  },
  {
    table: 'citations c',
    set: 'summary = null',
    where: `c.summary is not null
      and coalesce((select ${ENTRY_AGE} from thread_messages m
                     where m.message_id = coalesce(c.message_id,
                       (select a.message_id from artifacts a where a.artifact_id = c.artifact_id))),
                   c._loaded_at) < $1::date`,
  },
];

/**
 * A load's rows of days past retention without their text, in the batch's transaction right
 * after they were written (src/ingest/merge/merge.ts): a re-pull of an old day (a record the
 * service changed, a row deleted and back) never brings text back, not even for a moment to
 * another reader. Their hash and `response_chars` were taken from the text as sent, so a later
 * re-pull of the same record stays unchanged.
 */
export async function clearLoadedText(
  client: Pick<pg.ClientBase, 'query'>,
  messageIds: readonly string[],
  before: string,
): Promise<void> {
  await client.query(
    `update analytics_messages set input = '', response = ''
      where message_id = any($1::uuid[]) and message_date < $2::date and (input <> '' or response <> '')`,
    [messageIds, before],
  );
}

/** The first UTC day whose text is kept, `days` days of retention before `today`. */
export function retainedFrom(days: number, today: string = utcDay(Date.now())): string {
  return shiftDay(today, -days);
}

/**
 * Clears the text older than `days` days, in one transaction with the rollups' refresh (under
 * their lock): a reader never sees a day half swept. A dry run counts the rows it would clear.
 */
export async function applyRetention(
  pool: pg.Pool,
  days: number,
  opts: { dryRun?: boolean; today?: string } = {},
): Promise<RetentionResult> {
  const before = retainedFrom(days, opts.today);
  const rows: Record<string, number> = {};
  const name = (t: string) => t.split(' ')[0] as string;
  if (opts.dryRun) {
    for (const s of SWEEPS) {
      const r = await pool.query<{ n: string }>(
        `select count(*)::text as n from ${s.table} where ${s.where}`,
        [before],
      );
      rows[name(s.table)] = Number(r.rows[0]?.n ?? 0);
    }
    return { dryRun: true, before, rows };
  }
  await refreshRollups(pool, undefined, {
    first: async (c) => {
      for (const s of SWEEPS) {
        const r = await c.query(`update ${s.table} set ${s.set} where ${s.where}`, [before]);
        rows[name(s.table)] = r.rowCount ?? 0;
      }
    },
  });
  return { dryRun: false, before, rows };
}
