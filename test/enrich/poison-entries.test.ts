import type { ServerResponse } from 'node:http';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createServiceClient } from '../../src/api/index.ts';
import { STORED_KEY_BYTES, storedKey } from '../../src/common/stored-key.ts';
import { createEnrichOps } from '../../src/enrich/index.ts';
import { MAX_DEPTH } from '../../src/enrich/storable.ts';
import { captureLog, options, SECRETS } from '../api/helpers/client-setup.ts';
import { type ScriptedServer, startScriptedServer } from '../api/helpers/scripted-server.ts';
import { noise } from '../helpers/long-key-lines.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * Entries and artifacts no JSON encoder of ours can write back (nested 10,000 levels) or whose
 * numbers a double cannot hold (1e400 parses to Infinity, which JSON.stringify writes as null):
 * each is quarantined, the rest of its page loads, and the thread ends done instead of failing
 * its page on every attempt. The service's bodies are sent as raw text, since JSON.stringify
 * could not even produce them.
 */
const uuid = (n: number, prefix = 'a') => `${prefix.repeat(8)}-0000-4000-8000-${String(n).padStart(12, '0')}`;
const T1 = uuid(1, 'b');

const entry = (n: number, more = '') =>
  `{"message_id":"${uuid(n)}","role":"assistant","content":"text ${n}","created_at":"2026-01-01T10:00:00Z","citations":[]${more}}`;
const deep = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
const artifact = (more: string, val = 'v') =>
  `{"output_type":"table","title":"t","citations":[],"val":${JSON.stringify(val)},"resolved_text_objects":true${more}}`;

let tw: TestWarehouse;
let server: ScriptedServer | undefined;
let history: string[] = [];
const artifacts = new Map<string, string>();

beforeAll(async () => {
  tw = await createTestWarehouse({ prefix: 'poison' });
});
afterAll(async () => {
  await tw.dispose();
});
afterEach(async () => {
  await server?.close();
  server = undefined;
  history = [];
  artifacts.clear();
  await sql`truncate threads, thread_messages, citations, artifacts, rejected_records`.execute(tw.w.db);
});

function sendText(res: ServerResponse, status: number, text: string) {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function handle(req: { path: string; query: URLSearchParams }, res: ServerResponse) {
  if (req.path === '/v2/threads') {
    return sendText(
      res,
      200,
      JSON.stringify({ threads: [{ thread_id: T1, thread_name: 'n', message_count: history.length }] }),
    );
  }
  if (req.path === `/v2/threads/${T1}/messages`) {
    const s = Number(req.query.get('start_index'));
    const n = Number(req.query.get('limit_num'));
    return sendText(res, 200, `{"messages":[${history.slice(s, s + n).join(',')}]}`);
  }
  const m = /^\/v2\/threads\/[^/]+\/artifacts\/([^/]+)$/.exec(req.path);
  const a = m ? artifacts.get(m[1]!) : undefined;
  if (a !== undefined) return sendText(res, 200, `{"artifact":${a}}`);
  sendText(res, 404, '{"detail":"Not Found"}');
}

async function enrich() {
  server ??= await startScriptedServer((req, res) => handle(req, res));
  const { log } = captureLog();
  const api = createServiceClient(
    options(server.url, { legacyBaseUrl: `${server.url}/legacy`, apiKey: SECRETS.apiKey, maxRetries: 1 }),
    log,
  );
  await sql`insert into threads (thread_id, enrich_status, enrich_requested_at) values (${T1}, 'pending', now())
    on conflict (thread_id) do update set enrich_status = 'pending', enrich_requested_at = now()`.execute(
    tw.w.db,
  );
  const ops = createEnrichOps({
    db: tw.w.db,
    pool: tw.w.pool,
    api,
    log,
    concurrency: 2,
    pageSize: 2,
    threadListTtlMs: 0,
  });
  return ops.enrichThreads({ threadIds: [T1], loadId: 'L1' });
}

const rejects = async () =>
  (
    await tw.w.db
      .selectFrom('rejected_records')
      .select(['source', 'line_no', 'error_code', 'raw'])
      .orderBy('source')
      .orderBy('line_no')
      .orderBy('error_code')
      .execute()
  ).map((r) => [r.source, Number(r.line_no), r.error_code]);

describe('enrichment of poison entries and artifacts', () => {
  it('when entries and artifacts are nested 10,000 levels deep or hold 1e400, then they are quarantined, the rest loads and the thread is done', async () => {
    history = [
      entry(0),
      entry(1, `,"extra":${deep(10_000)}`),
      entry(2, ',"score":1e400'),
      entry(3, ',"artifact_ids":["deep-art","num-art","ok-art"]'),
      entry(4, `,"fine":${deep(MAX_DEPTH - 1)},"small":1e-400`),
    ];
    artifacts.set('deep-art', artifact(`,"meta":${deep(10_000)}`));
    artifacts.set('num-art', artifact(',"size":-1e400'));
    // Its `val` text is kept; the JSON parsed from it could not be stored, so val_json is null.
    artifacts.set('ok-art', artifact('', `{"a":${deep(10_000)}}`));

    const counts = await enrich();
    expect(counts).toMatchObject({ done: 1, messages: 3, artifacts: 1 });
    expect(await rejects()).toEqual([
      ['artifact', 3, 'artifact_nesting_too_deep'],
      ['artifact', 3, 'artifact_number_out_of_range'],
      ['history', 1, 'history_nesting_too_deep'],
      ['history', 2, 'history_number_out_of_range'],
    ]);
    const t = await tw.w.db.selectFrom('threads').selectAll().executeTakeFirstOrThrow();
    expect(t).toMatchObject({ enrich_status: 'done', history_count: 5 });
    const msgs = await tw.w.db
      .selectFrom('thread_messages')
      .select(['position'])
      .orderBy('position')
      .execute();
    expect(msgs.map((m) => m.position)).toEqual([0, 3, 4]);
    const art = await tw.w.db
      .selectFrom('artifacts')
      .select(['artifact_id', 'val_json'])
      .executeTakeFirstOrThrow();
    expect(art).toEqual({ artifact_id: 'ok-art', val_json: null });
    // The quarantine keeps what it can of the deep entry: its JSON down to the limit.
    const raw = await tw.w.db
      .selectFrom('rejected_records')
      .select(['raw'])
      .where('error_code', '=', 'history_nesting_too_deep')
      .executeTakeFirstOrThrow();
    expect(raw.raw).toContain(uuid(1));
    expect(raw.raw).toContain('nested deeper than');
  });

  it('when the quarantined deep entry is the last one stored and the thread is enriched again, then the new entries load and nothing is quarantined twice', async () => {
    history = [entry(0), entry(1, `,"extra":${deep(10_000)}`)];
    expect(await enrich()).toMatchObject({ done: 1, messages: 1 });
    history.push(entry(2));
    expect(await enrich()).toMatchObject({ done: 1, messages: 1 });
    expect(await rejects()).toEqual([['history', 1, 'history_nesting_too_deep']]);
    const msgs = await tw.w.db
      .selectFrom('thread_messages')
      .select(['position'])
      .orderBy('position')
      .execute();
    expect(msgs.map((m) => m.position)).toEqual([0, 2]);
    const t = await tw.w.db.selectFrom('threads').selectAll().executeTakeFirstOrThrow();
    expect(t).toMatchObject({ enrich_status: 'done', history_count: 3 });
  });

  it('when entries and artifacts have a key of 1 MB, a 600-byte key, a 600-byte artifact id or a 20 KB citation name, then the over-limit ones are quarantined, the rest loads with bounded keys, and drift is recorded only of what loaded', async () => {
    await sql`truncate schema_drift, schema_drift_counts`.execute(tw.w.db);
    const mega = noise(1 << 20, 'mega');
    const key600 = noise(600, 'history-600');
    const artKey600 = noise(600, 'artifact-600');
    const longName = noise(20_000, 'citation-name');
    history = [
      entry(0),
      entry(1, `,"${mega}":1`),
      entry(2, `,"${key600}":"x"`),
      entry(3, ',"artifact_ids":["mega-art","ok-art"]'),
      entry(4, `,"artifact_ids":["${'a'.repeat(600)}"]`),
      `{"message_id":"${uuid(5)}","role":"assistant","content":"c","citations":[{"id":"c1","citation_type":"web","name":"${longName}"}]}`,
      // Quarantined for its nesting: its new field `mood` is not drift.
      entry(6, `,"mood":"calm","x":${deep(10_000)}`),
    ];
    artifacts.set('mega-art', artifact(`,"${mega}":1`));
    artifacts.set('ok-art', artifact(`,"${artKey600}":1`));

    const counts = await enrich();
    expect(counts).toMatchObject({ done: 1, messages: 4, artifacts: 1 });
    expect(await rejects()).toEqual([
      ['artifact', 3, 'artifact_key_too_long'],
      ['history', 1, 'history_key_too_long'],
      ['history', 4, 'history_invalid_field'],
      ['history', 6, 'history_nesting_too_deep'],
    ]);
    const detail = await tw.w.db
      .selectFrom('rejected_records')
      .select(['error_detail'])
      .where('error_code', '=', 'history_key_too_long')
      .executeTakeFirstOrThrow();
    expect(detail.error_detail).toContain(`a key of ${1 << 20} bytes of UTF-8, more than 1024`);
    const t = await tw.w.db.selectFrom('threads').selectAll().executeTakeFirstOrThrow();
    expect(t).toMatchObject({ enrich_status: 'done', history_count: 7 });

    // The citation's name is stored bounded (a key of the citation index and rollups); the
    // entry's raw keeps it whole.
    const cit = await tw.w.db.selectFrom('citations').select(['name']).executeTakeFirstOrThrow();
    expect(cit.name).toBe(storedKey(longName));
    expect(Buffer.byteLength(cit.name ?? '')).toBeLessThanOrEqual(STORED_KEY_BYTES);
    const raw = await sql<{ name: string }>`select raw->'citations'->0->>'name' as name from thread_messages
      where position = 5`.execute(tw.w.db);
    expect(raw.rows[0]?.name).toBe(longName);

    const drift = await tw.w.db
      .selectFrom('schema_drift')
      .select(['source', 'path', 'kind'])
      .orderBy('source')
      .execute();
    expect(drift).toEqual([
      { source: 'artifact', path: storedKey(artKey600), kind: 'new_field' },
      { source: 'history', path: storedKey(key600), kind: 'new_field' },
    ]);
    for (const d of drift) expect(Buffer.byteLength(d.path)).toBeLessThanOrEqual(STORED_KEY_BYTES);
  });
});
