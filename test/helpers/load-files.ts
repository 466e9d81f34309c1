import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TestWarehouse } from './warehouse.ts';

/** Writes each content to a new file in a fresh temporary directory and returns its path. */
export function tempFiles(prefix: string): (content: string) => string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  let n = 0;
  return (content) => {
    const p = path.join(dir, `f${n++}.jsonl`);
    writeFileSync(p, content);
    return p;
  };
}

/** The loaded content of every message row, in exact text forms, for row-by-row comparisons. */
const COMPARED = `message_id::text, thread_id::text, user_id::text,
  to_char(message_time at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') as message_time, message_date::text,
  input, response, extra::text, record_hash, _deleted_at`;

export async function messageRows(tw: TestWarehouse): Promise<Record<string, unknown>[]> {
  return (await tw.w.pool.query(`select ${COMPARED} from analytics_messages order by message_id`)).rows;
}
