import { type Kysely, sql } from 'kysely';

/**
 * How the warehouse stores user ids (CRS_USER_ID_POLICY, docs/privacy.md), written by the first
 * load that finds none: `keep` or `pseudonymize` with the fingerprint of CRS_PSEUDONYM_KEY (never
 * the key). Every later load compares its own policy with it and refuses to mix plain ids and
 * pseudonyms, or pseudonyms under two keys, in one warehouse. Bookkeeping: in the internal schema.
 *
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  const [{ schema }] = (await sql<{ schema: string }>`select current_schema() as schema`.execute(db))
    .rows as [{ schema: string }];
  await sql`
    create table ${sql.id(`${schema}_internal`)}.user_id_policy (
      one boolean primary key default true check (one),
      policy text not null check (policy in ('keep', 'pseudonymize')),
      key_fingerprint text,
      set_at timestamptz not null default now()
    )`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table if exists user_id_policy`.execute(db);
}
