import type pg from 'pg';
import { keyFingerprint } from '../../common/pseudonym.ts';
import type { Config } from '../../config.ts';
import { CrsError } from '../../errors.ts';

type Policy = Config['userIds'];

/**
 * Before a load writes anything: the warehouse's user id policy (migration 2026-11-28T23-00-00)
 * is this load's, or the load is refused. The first load records it; a warehouse that already
 * holds rows without a record holds plain ids (`keep`). Mixing would make one person two users
 * in every count, and the erasure of a plain id would miss their pseudonymous rows.
 */
export async function checkUserIdPolicy(pool: Pick<pg.Pool, 'query'>, want: Policy): Promise<void> {
  const fingerprint = want.policy === 'pseudonymize' ? keyFingerprint(want.key) : null;
  let row = (
    await pool.query<{ policy: string; key_fingerprint: string | null }>('select * from user_id_policy')
  ).rows[0];
  if (!row) {
    const held = await pool.query<{ any: boolean }>(
      'select exists (select 1 from analytics_messages) or exists (select 1 from threads) as any',
    );
    const existing: Policy['policy'] = held.rows[0]?.any ? 'keep' : want.policy;
    await pool.query(
      'insert into user_id_policy (policy, key_fingerprint) values ($1, $2) on conflict do nothing',
      [existing, existing === want.policy ? fingerprint : null],
    );
    row = (
      await pool.query<{ policy: string; key_fingerprint: string | null }>('select * from user_id_policy')
    ).rows[0];
  }
  if (!row) throw new Error('the user id policy could not be recorded');
  if (row.policy !== want.policy)
    throw new CrsError(
      'CONFIG_INVALID',
      `CRS_USER_ID_POLICY=${want.policy}, but this warehouse stores user ids as ${row.policy === 'keep' ? 'sent (keep)' : 'pseudonyms'}: ` +
        'one warehouse never mixes the two. Use a new CRS_SCHEMA for the other policy (and re-load into it), ' +
        `or set CRS_USER_ID_POLICY=${row.policy} (docs/privacy.md)`,
    );
  if (fingerprint !== null && row.key_fingerprint !== fingerprint)
    throw new CrsError(
      'CONFIG_INVALID',
      "CRS_PSEUDONYM_KEY is not the key this warehouse's pseudonyms were made with: the same person would get " +
        'a second pseudonym. Set the key the warehouse was loaded with (docs/privacy.md)',
    );
}
