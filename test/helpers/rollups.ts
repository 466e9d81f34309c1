import { ROLLUP_TABLES } from '../../src/warehouse/rollups/rebuild.ts';
import type { TestWarehouse } from './warehouse.ts';

/** Every rollup table's rows, each as JSON, sorted: two warehouses (or two moments) compare equal. */
export async function rollupRows(tw: TestWarehouse): Promise<Record<string, unknown[]>> {
  const out: Record<string, unknown[]> = {};
  for (const t of ROLLUP_TABLES) {
    const r = await tw.w.pool.query(`select * from ${t}`);
    out[t] = r.rows.map((x) => JSON.stringify(x)).sort();
  }
  return out;
}
