import { type Kysely, sql } from 'kysely';

/**
 * `response_chars` is written by the loader instead of computed by the server. As a generated
 * column, `length(btrim(response, ...))` walked every response character by character twice
 * (UTF-8 lengths) on every insert and update: a fifth of the server's CPU while loading (perf,
 * 100k lines). The loader computes the same value from the text it already holds (see
 * src/ingest/merge/copy-binary.ts, `responseChars`; a test checks it against PostgreSQL's expression).
 * Existing values are kept: DROP EXPRESSION turns the column into an ordinary one (not null).
 *
 * The texts are stored with lz4 instead of pglz where the server supports it (compiled in since
 * PostgreSQL 14 on most builds): responses long enough to be compressed cost pglz ~5% of the
 * server's load CPU, and BI reads decompress faster. A server without lz4 keeps pglz.
 * Frozen in time: never import application code here.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table analytics_messages alter column response_chars drop expression`.execute(db);
  // Every row has it (it was generated); a writer that forgot it must fail, not store a null.
  await sql`alter table analytics_messages alter column response_chars set not null`.execute(db);
  await sql`
    do $$
    begin
      alter table analytics_messages
        alter column input set compression lz4,
        alter column response set compression lz4;
    exception when feature_not_supported then
      null;
    end $$`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`
    alter table analytics_messages
      alter column input set compression default,
      alter column response set compression default`.execute(db);
  // A column cannot become generated again: dropped and added back (the views depend on it).
  await sql`alter table analytics_messages drop column response_chars cascade`.execute(db);
  await sql`
    alter table analytics_messages
      add column response_chars integer
      generated always as (length(btrim(response, E' \t\n\r\f\x0B'))) stored`.execute(db);
}
