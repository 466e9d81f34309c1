import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import { type Checked, checkedClient, manualClock, parseSse } from './support/client.ts';

/** A whole thread lifecycle through the v2 and legacy APIs; every response is validated against /openapi.json. */

// A fixed clock: "today" of the export cannot change under the test at midnight.
const TODAY = '2026-04-02';
const clock = manualClock(`${TODAY}T10:00:00.000Z`);
let sim: Simulator;
let api: Checked;

beforeAll(async () => {
  sim = await startSimulator({ seed: 11, taskStepMs: 2, now: clock.now });
  api = await checkedClient(sim);
});
afterAll(async () => {
  await sim.close();
});

const json = (headers: Record<string, string>) => ({ ...headers, 'content-type': 'application/json' });
const T = '/v2/threads/{thread_id}';

async function createThread(name: unknown): Promise<string> {
  const r = await api.call('POST', '/v2/threads', '/v2/threads', {
    headers: json(api.v2()),
    body: JSON.stringify({ thread_name: name }),
  });
  expect(r.status).toBe(201);
  return (r.body as { thread_id: string }).thread_id;
}

async function send(threadId: string, message: string) {
  return api.call('POST', `${T}/messages`, `/v2/threads/${threadId}/messages`, {
    headers: api.v2(),
    body: new URLSearchParams({ message }),
  });
}

describe('thread lifecycle', () => {
  it('when a client creates, renames, uploads, messages, reads and deletes a thread, then every answer follows the spec', async () => {
    const id = await createThread('Lithium research');

    const list = await api.call('GET', '/v2/threads', '/v2/threads', { headers: api.v2() });
    expect(list.status).toBe(200);
    expect(
      (list.body as { threads: Array<{ thread_id: string }> }).threads.map((t) => t.thread_id),
    ).toContain(id);

    const renamed = await api.call('PATCH', T, `/v2/threads/${id}`, {
      headers: json(api.v2()),
      body: JSON.stringify({ name: 'Li — renamed' }),
    });
    expect(renamed.body).toEqual({ thread_id: id, thread_name: 'Li — renamed' });
    expect(sim.truth.threads().find((t) => t.thread_id === id)?.thread_name).toBe('Li — renamed');

    const form = new FormData();
    form.append('file', new Blob(['quarter,revenue\nQ1,10\n'], { type: 'text/csv' }), 'revenue.csv');
    const up = await api.call('POST', `${T}/files`, `/v2/threads/${id}/files`, {
      headers: api.v2(),
      body: form,
    });
    expect(up.status).toBe(201);
    const fileId = (up.body as { file_id: string }).file_id;

    const sent = await send(id, `Summarise ${fileId} please`);
    expect(sent.status).toBe(202);
    const { task_id: taskId, message_id: userMessageId } = sent.body as {
      task_id: string;
      message_id: string;
    };

    // The stream replays what happened so far and closes after completion.
    const events = await api.call('GET', `${T}/events`, `/v2/threads/${id}/events`, { headers: api.v2() });
    expect(events.status).toBe(200);
    const sse = parseSse(events.text);
    const kinds = sse.map((e) => e.event);
    expect(kinds[0]).toBe('reasoning');
    expect(kinds).toContain('message_chunk');
    expect(kinds.at(-2)).toBe('final_message');
    expect(kinds.at(-1)).toBe('completion');
    expect(sse.at(-1)?.data).toMatchObject({ task_id: taskId, status: 'completed' });

    const chunks = sse
      .filter((e) => e.event === 'message_chunk')
      .map((e) => e.data as { delta: string; citations: unknown[] });
    const final = (
      sse.find((e) => e.event === 'final_message')!.data as {
        message: { content: string; citations: unknown[]; artifact_ids: string[]; message_id: string };
      }
    ).message;
    expect(chunks.map((c) => c.delta).join('')).toBe(final.content);
    expect(chunks.flatMap((c) => c.citations)).toEqual(final.citations);
    const streamedArtifacts = sse
      .filter((e) => e.event === 'artifact')
      .map((e) => (e.data as { artifact_id: string }).artifact_id);
    expect(streamedArtifacts).toEqual(final.artifact_ids);

    const progress = await api.call('GET', `${T}/progress`, `/v2/threads/${id}/progress`, {
      headers: api.v2(),
    });
    expect(progress.body).toMatchObject({
      task_id: taskId,
      status: 'completed',
      progress: 1,
      message_id: final.message_id,
    });

    const history = await api.call('GET', `${T}/messages`, `/v2/threads/${id}/messages`, {
      headers: api.v2(),
    });
    const messages = (history.body as { messages: Array<Record<string, unknown>> }).messages;
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(messages[0]).toMatchObject({ message_id: userMessageId, content: `Summarise ${fileId} please` });
    expect(messages[1]).toEqual(final);
    expect(messages).toEqual(sim.truth.threadHistory(id));
    // The message named an uploaded file: the reply cites it as custom_doc.
    expect(final.citations).toContainEqual(
      expect.objectContaining({ citation_type: 'custom_doc', file_id: fileId, file_name: 'revenue.csv' }),
    );

    for (const artifactId of final.artifact_ids) {
      const v2 = await api.call(
        'GET',
        `${T}/artifacts/{artifact_id}`,
        `/v2/threads/${id}/artifacts/${artifactId}`,
        { headers: api.v2() },
      );
      expect(v2.status).toBe(200);
      const legacy = await api.call(
        'GET',
        '/client/v2/thread/{thread_id}/artifact/{artifact_id}',
        `${sim.legacyBaseUrl}/client/v2/thread/${id}/artifact/${artifactId}`,
        { headers: api.legacy() },
      );
      expect(legacy.body).toEqual({
        artifact_id: artifactId,
        artifact: (v2.body as { artifact: unknown }).artifact,
      });
      expect(sim.truth.artifact(id, artifactId)?.artifact).toEqual(
        (v2.body as { artifact: unknown }).artifact,
      );
    }

    // The reply joins the analytics export of today.
    const today = TODAY;
    expect(sim.truth.exportDay(today).find((r) => r['Message ID'] === final.message_id)).toMatchObject({
      Input: `Summarise ${fileId} please`,
      Response: final.content,
      'Thread ID': id,
    });

    const del = await api.call('DELETE', T, `/v2/threads/${id}`, { headers: api.v2() });
    expect(del.status).toBe(204);
    for (const [method, tpl, path] of [
      ['GET', `${T}/messages`, `/v2/threads/${id}/messages`],
      ['GET', `${T}/progress`, `/v2/threads/${id}/progress`],
      [
        'GET',
        `${T}/artifacts/{artifact_id}`,
        `/v2/threads/${id}/artifacts/${final.artifact_ids[0] ?? 'art_x'}`,
      ],
      ['DELETE', T, `/v2/threads/${id}`],
    ] as const) {
      const r = await api.call(method, tpl, path, { headers: api.v2() });
      expect(r.status, `${method} ${path}`).toBe(404);
    }
    expect(sim.truth.isDeleted(id)).toBe(true);
    expect(sim.truth.threadHistory(id)).toBeUndefined();
    expect(sim.truth.exportDay(today).some((r) => r['Thread ID'] === id)).toBe(false);
  });

  it('when a running task is cancelled, then it stops and the thread records "User cancelled" with an empty export response', async () => {
    const slow = await startSimulator({ seed: 12, taskStepMs: 60_000, now: clock.now });
    const client = await checkedClient(slow);
    try {
      const created = await client.call('POST', '/v2/threads', '/v2/threads', {
        headers: json(client.v2()),
        body: JSON.stringify({ thread_name: 'to cancel' }),
      });
      const id = (created.body as { thread_id: string }).thread_id;
      const sent = await client.call('POST', `${T}/messages`, `/v2/threads/${id}/messages`, {
        headers: client.v2(),
        body: new URLSearchParams({ message: 'a long question' }),
      });
      const busy = await client.call('POST', `${T}/messages`, `/v2/threads/${id}/messages`, {
        headers: client.v2(),
        body: new URLSearchParams({ message: 'another' }),
      });
      expect(busy.status).toBe(409);
      const running = await client.call('GET', `${T}/progress`, `/v2/threads/${id}/progress`, {
        headers: client.v2(),
      });
      expect((running.body as { status: string }).status).toBe('queued');

      const cancel = await client.call('DELETE', `${T}/task`, `/v2/threads/${id}/task`, {
        headers: client.v2(),
      });
      expect(cancel.status).toBe(200);
      const cancelledId = (cancel.body as { message_id: string }).message_id;
      expect(cancel.body).toMatchObject({
        task_id: (sent.body as { task_id: string }).task_id,
        status: 'cancelled',
      });

      const history = await client.call('GET', `${T}/messages`, `/v2/threads/${id}/messages`, {
        headers: client.v2(),
      });
      const messages = (history.body as { messages: Array<Record<string, unknown>> }).messages;
      expect(messages).toHaveLength(2);
      expect(messages[1]).toMatchObject({
        message_id: cancelledId,
        role: 'system',
        content: 'User cancelled',
        status: 'cancelled',
      });

      const events = await client.call('GET', `${T}/events`, `/v2/threads/${id}/events`, {
        headers: client.v2(),
      });
      expect(parseSse(events.text).at(-1)?.data).toMatchObject({ status: 'cancelled' });
      const again = await client.call('DELETE', `${T}/task`, `/v2/threads/${id}/task`, {
        headers: client.v2(),
      });
      expect(again.status).toBe(409);

      const today = TODAY;
      expect(slow.truth.exportDay(today).find((r) => r['Message ID'] === cancelledId)).toMatchObject({
        Input: 'a long question',
        Response: '',
      });
    } finally {
      await slow.close();
    }
  });

  it('when thread_name is missing or not a string, then create answers 422', async () => {
    for (const body of [{}, { thread_name: 5 }, { thread_name: null }]) {
      const r = await api.call('POST', '/v2/threads', '/v2/threads', {
        headers: json(api.v2()),
        body: JSON.stringify(body),
      });
      expect(r.status, JSON.stringify(body)).toBe(422);
    }
    const notJson = await api.call('POST', '/v2/threads', '/v2/threads', {
      headers: json(api.v2()),
      body: '[1',
    });
    expect(notJson.status).toBe(422);
  });

  it('when a message or a file part is missing, or rename has no name, then the API answers 422', async () => {
    const id = await createThread('validation');
    const noMessage = await api.call('POST', `${T}/messages`, `/v2/threads/${id}/messages`, {
      headers: api.v2(),
      body: new URLSearchParams({ other: 'x' }),
    });
    expect(noMessage.status).toBe(422);
    const noFile = new FormData();
    noFile.append('other', 'x');
    const upload = await api.call('POST', `${T}/files`, `/v2/threads/${id}/files`, {
      headers: api.v2(),
      body: noFile,
    });
    expect(upload.status).toBe(422);
    const rename = await api.call('PATCH', T, `/v2/threads/${id}`, {
      headers: json(api.v2()),
      body: JSON.stringify({ thread_name: 'x' }),
    });
    expect(rename.status).toBe(422);
  });

  it('when a thread is unknown, then every thread operation answers 404', async () => {
    const unknown = '00000000-0000-4000-8000-000000000000';
    const r = await api.call('GET', `${T}/messages`, `/v2/threads/${unknown}/messages`, {
      headers: api.v2(),
    });
    expect(r.status).toBe(404);
    const s = await send(unknown, 'hi');
    expect(s.status).toBe(404);
  });

  it('when a thread belongs to a restricted user, then its contents answer 403', async () => {
    const restricted = sim.truth.threads().find((t) => sim.truth.isRestricted(t.thread_id));
    expect(restricted).toBeDefined();
    const id = restricted!.thread_id;
    const r = await api.call('GET', `${T}/messages`, `/v2/threads/${id}/messages`, { headers: api.v2() });
    expect(r.status).toBe(403);
    const s = await send(id, 'let me in');
    expect(s.status).toBe(403);
  });

  it('when history is read in pages, then start_index/limit_num slice the full history and bad values answer 422', async () => {
    const long = sim.truth
      .threads()
      .find((t) => t.message_count >= 6 && !sim.truth.isRestricted(t.thread_id))!;
    const full = sim.truth.threadHistory(long.thread_id)!;
    const pages: unknown[] = [];
    for (let start = 0; start < full.length; start += 2) {
      const r = await api.call(
        'GET',
        `${T}/messages`,
        `/v2/threads/${long.thread_id}/messages?start_index=${start}&limit_num=2`,
        { headers: api.v2() },
      );
      pages.push(...(r.body as { messages: unknown[] }).messages);
    }
    expect(pages).toEqual(full);
    const all = await api.call('GET', `${T}/messages`, `/v2/threads/${long.thread_id}/messages`, {
      headers: api.v2(),
    });
    expect((all.body as { messages: unknown[] }).messages).toEqual(full.slice(0, 50));
    for (const q of ['limit_num=0', 'limit_num=101', 'start_index=-1', 'limit_num=abc']) {
      const r = await api.call('GET', `${T}/messages`, `/v2/threads/${long.thread_id}/messages?${q}`, {
        headers: api.v2(),
      });
      expect(r.status, q).toBe(422);
    }
  });

  it('when a procedural history is read, then its assistant entries carry citations of the named types with every field', () => {
    const entries = sim.truth.threads().flatMap((t) => sim.truth.threadHistory(t.thread_id) ?? []);
    const citations = entries.flatMap((e) => e.citations);
    const types = new Set(citations.map((c) => c.citation_type));
    for (const t of ['custom_doc', 'web', 'news_development', 'document']) expect(types).toContain(t);
    for (const c of citations) api.validator.component('Citation', c);
    expect(citations.find((c) => c.citation_type === 'web')).toHaveProperty('url');
    expect(citations.find((c) => c.citation_type === 'news_development')).toHaveProperty('article_count');
    const counts = new Set(entries.filter((e) => e.role === 'assistant').map((e) => e.artifact_ids.length));
    expect([...counts].sort()).toEqual([0, 1, 2, 3]);
  });

  it('when artifact ids are malformed, then both artifact forms answer 422; the legacy dynamic output answers a string', async () => {
    const bad = await api.call(
      'GET',
      `${T}/artifacts/{artifact_id}`,
      '/v2/threads/not-a-uuid/artifacts/art_1',
      { headers: api.v2() },
    );
    expect(bad.status).toBe(422);
    const legacyBad = await api.call(
      'GET',
      '/client/v2/thread/{thread_id}/artifact/{artifact_id}',
      `${sim.legacyBaseUrl}/client/v2/thread/00000000-0000-4000-8000-000000000000/artifact/${encodeURIComponent('a b')}`,
      { headers: api.legacy() },
    );
    expect(legacyBad.status).toBe(422);
    const agent = '6f1c2f0e-2a51-4a43-9b1e-0d6f5a0c9e11';
    const out = await api.call(
      'GET',
      '/client/agent/dynamic-output/{agent_id}',
      `${sim.legacyBaseUrl}/client/agent/dynamic-output/${agent}`,
      { headers: api.legacy() },
    );
    expect(out.status).toBe(200);
    expect(typeof out.body).toBe('string');
    const badAgent = await api.call(
      'GET',
      '/client/agent/dynamic-output/{agent_id}',
      `${sim.legacyBaseUrl}/client/agent/dynamic-output/nope`,
      { headers: api.legacy() },
    );
    expect(badAgent.status).toBe(422);
  });

  it('when the OpenAPI document is read, then it holds every operation of spec §4 and the three security schemes of §5', async () => {
    const doc = (await (await fetch(`${sim.baseUrl}/openapi.json`)).json()) as {
      openapi: string;
      paths: Record<string, Record<string, unknown>>;
      components: { securitySchemes: Record<string, { type: string; name?: string }> };
    };
    expect(doc.openapi).toMatch(/^3\.1\./);
    const ops = Object.entries(doc.paths).flatMap(([p, item]) =>
      Object.keys(item)
        .filter((k) => ['get', 'post', 'patch', 'delete', 'put'].includes(k))
        .map((m) => `${m.toUpperCase()} ${p}`),
    );
    expect(ops).toEqual(
      expect.arrayContaining([
        'POST /v2/threads',
        'GET /v2/threads',
        'PATCH /v2/threads/{thread_id}',
        'DELETE /v2/threads/{thread_id}',
        'POST /v2/threads/{thread_id}/messages',
        'GET /v2/threads/{thread_id}/messages',
        'GET /v2/threads/{thread_id}/progress',
        'DELETE /v2/threads/{thread_id}/task',
        'POST /v2/threads/{thread_id}/files',
        'GET /v2/threads/{thread_id}/artifacts/{artifact_id}',
        'GET /v2/threads/{thread_id}/events',
        'GET /v2/analytics/messages',
        'GET /client/v2/thread/{thread_id}/artifact/{artifact_id}',
        'GET /client/agent/dynamic-output/{agent_id}',
        'POST /oauth/token',
      ]),
    );
    // It is a valid OpenAPI 3.1 document by the official schema...
    const oas = new Validator();
    const result = await oas.validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(oas.version).toBe('3.1');
    // ...every schema in it is valid JSON Schema 2020-12, and every $ref resolves.
    expect(api.validator.checkAllSchemas().length).toBeGreaterThan(40);
    const schemes = doc.components.securitySchemes;
    expect(
      Object.values(schemes)
        .map((s) => s.type)
        .sort(),
    ).toEqual(['apiKey', 'http', 'http']);
    expect(Object.values(schemes).find((s) => s.type === 'apiKey')?.name).toBe('x-api-key');
  });
});
