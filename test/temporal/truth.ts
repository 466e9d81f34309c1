import { sql } from 'kysely';
import type { Simulator } from '../../src/simulator/index.ts';
import type { Warehouse } from '../../src/warehouse/db.ts';

export interface Row {
  message_id: string;
  thread_id: string;
  user_id: string;
  input: string;
  response: string;
}

/** The simulator's export of the days, as the rows a correct load leaves (last line of a key wins). */
export function expectedRows(sim: Simulator, days: string[]): Row[] {
  const byId = new Map<string, Row>();
  for (const d of days) {
    for (const r of sim.truth.exportDay(d)) {
      const id = r['Message ID'].toLowerCase();
      byId.set(id, {
        message_id: id,
        thread_id: r['Thread ID'].toLowerCase(),
        user_id: r['User ID'].toLowerCase(),
        input: r.Input,
        response: r.Response,
      });
    }
  }
  return [...byId.values()].sort((a, b) => a.message_id.localeCompare(b.message_id));
}

/** The live rows of the warehouse for those days, in the same shape and order. */
export async function warehouseRows(w: Warehouse, days: string[]): Promise<Row[]> {
  const rows = await w.db
    .selectFrom('analytics_messages')
    .select([
      sql<string>`message_id::text`.as('message_id'),
      sql<string>`thread_id::text`.as('thread_id'),
      sql<string>`user_id::text`.as('user_id'),
      'input',
      'response',
    ])
    .where('message_date', 'in', days)
    .where('_deleted_at', 'is', null)
    .orderBy('message_id')
    .execute();
  return rows.map((r) => ({ ...r })).sort((a, b) => a.message_id.localeCompare(b.message_id));
}
