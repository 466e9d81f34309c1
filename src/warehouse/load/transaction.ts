import type { LoaderClient } from '../ledger.ts';
import { marksWaitSql } from '../rollups/mark.ts';

/**
 * The loader's own transactions, on its pg client (a batch with its checkpoint, a day's delete
 * step with its ledger row, the held deletes a load saw): begun, committed and rolled back here,
 * so that the loader (src/ingest) sends no SQL of its own. The caller keeps its try/catch: where
 * `begin` stands in it decides whether a failed `begin` is followed by a rollback.
 */

/**
 * `begin`; with `waitDay`, in the same round trip, the setting that makes the rollup marks of
 * that day's writes wait for its pull's finalize (`marksWaitSql`: a pull of one export day).
 */
export async function beginLoad(client: LoaderClient, waitDay: string | null = null): Promise<void> {
  await client.query(waitDay ? `begin; ${marksWaitSql(waitDay)}` : 'begin');
}

export async function commitLoad(client: LoaderClient): Promise<void> {
  await client.query('commit');
}

/** Rolls back after a failure, never throwing: the failure that led here is the one to report. */
export async function rollbackLoad(client: LoaderClient): Promise<void> {
  await client.query('rollback').catch(() => {});
}
