import type { IncomingMessage, ServerResponse } from 'node:http';
import { itemAt, present } from '../common/checked.ts';
import {
  AUD_ANALYTICS,
  AUD_V2,
  bearerOf,
  GRANT_TOKEN_EXCHANGE,
  issueToken,
  type Keys,
  sameSecret,
  TOKEN_TYPE_ACCESS,
  TOKEN_TYPE_JWT,
  verifyJwt,
} from './auth.ts';
import type { Artifact, HistoryEntry } from './content.ts';
import type { Dataset, ThreadRef } from './dataset.ts';
import { streamExport } from './export-stream.ts';
import {
  type FaultEngine,
  type FaultSpec,
  mergeFaults,
  NEW_FIELD,
  NEW_FIELD_VALUE,
  type PoisonKind,
  parseFaultSpec,
  poisonValueText,
  type RequestFaults,
  withProtoKeys,
} from './faults.ts';
import {
  fail,
  HttpError,
  holdResponse,
  invalid,
  readBody,
  readForm,
  readJsonObject,
  requiredString,
  sendEmpty,
  sendJson,
  sendJsonText,
} from './http.ts';
import {
  EVENTS_PATH,
  FAULT_HEADER,
  HISTORY_DEFAULT_LIMIT,
  HISTORY_MAX_LIMIT,
  LEGACY_PREFIX,
  TOKEN_PATH,
} from './openapi.ts';
import { parseDay } from './plan.ts';
import { hash4, isUuid, Rng, stringHash } from './prng.ts';
import type { TaskRunner } from './tasks.ts';
import { sentenceOf } from './text.ts';

export interface ServerContext {
  /** Serve GET/PUT /_sim/faults (switch faults from another process) and GET /_sim/counts. */
  admin: boolean;
  ds: Dataset;
  keys: Keys;
  engine: FaultEngine;
  runner: TaskRunner;
  openapi: () => unknown;
  accessTokenTtlSec: number;
  sleep: (ms: number) => Promise<void>;
  /** Tokens replaced by a rotation (`rotateCredential`): refused from then on, valid or not. */
  revoked: Set<string>;
}

const MAX_UPLOAD = 10 * 1024 * 1024;
const ARTIFACT_ID_RE = /^[A-Za-z0-9_-]{1,200}$/;

function segment(raw: string, loc: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw invalid({ loc: ['path', loc], msg: 'Malformed path segment', type: 'value_error' });
  }
}

export function createHandler(ctx: ServerContext): (req: IncomingMessage, res: ServerResponse) => void {
  const arrivals = createArrivals();
  return (req, res) => {
    handle(ctx, req, res, arrivals).catch((err: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (err instanceof HttpError) sendJson(res, err.status, err.body, err.headers);
      else sendJson(res, 500, { detail: 'internal simulator error' });
    });
  };
}

async function handle(
  ctx: ServerContext,
  req: IncomingMessage,
  res: ServerResponse,
  arrivals: Arrivals,
): Promise<void> {
  const method = req.method ?? 'GET';
  const url = new URL(req.url ?? '/', 'http://sim.invalid');
  const path = url.pathname;
  if (method === 'GET' && path === '/openapi.json') return sendJson(res, 200, ctx.openapi());
  if (method === 'GET' && path === '/healthz') return sendJson(res, 200, { status: 'ok' });
  if (ctx.admin && path.startsWith('/_sim/')) return admin(ctx, req, res, method, path, arrivals);
  arrivals.add(Date.now());

  let spec: FaultSpec = ctx.engine.spec;
  const header = req.headers[FAULT_HEADER];
  if (typeof header === 'string' && header.trim() !== '') {
    try {
      spec = mergeFaults(spec, parseFaultSpec(header));
    } catch (err) {
      throw fail(400, `bad ${FAULT_HEADER} header: ${(err as Error).message}`);
    }
  }
  const rf = ctx.engine.decide(method, req.url ?? path, spec);
  if (rf.latencyMs > 0) {
    const gate = ctx.sleep(rf.latencyMs);
    // Streamed answers (the export, the thread list, events) wait before they start; the others
    // are computed meanwhile and held until the latency has passed (http.ts, holdResponse).
    if (path === '/v2/analytics/messages' || path === '/v2/threads' || path.endsWith('/events')) await gate;
    else holdResponse(res, gate);
  }
  if (rf.status === 429) {
    ctx.engine.count('429');
    throw fail(429, 'Too Many Requests', { 'retry-after': String(rf.retryAfterSec) });
  }
  if (rf.status) {
    ctx.engine.count('5xx');
    throw fail(rf.status, 'Service temporarily unavailable');
  }

  if (path === TOKEN_PATH) return route(method, ['POST'], () => tokenExchange(ctx, req, res, spec));
  if (path === '/v2/analytics/messages')
    return route(method, ['GET'], () => analytics(ctx, req, res, url, spec, rf));
  if (path.startsWith(`${LEGACY_PREFIX}/`))
    return legacy(ctx, req, res, path.slice(LEGACY_PREFIX.length), method);
  if (path === '/v2/threads' || path.startsWith('/v2/threads/')) return v2(ctx, req, res, url, method, rf);
  throw fail(404, 'Not Found');
}

function route(method: string, allowed: string[], fn: () => Promise<void> | void): Promise<void> | void {
  if (!allowed.includes(method)) throw fail(405, 'Method Not Allowed', { allow: allowed.join(', ') });
  return fn();
}

// ---- auth ---------------------------------------------------------------------------------------

const wwwAuth = (error: string, description: string) => ({
  'www-authenticate': `Bearer error="${error}", error_description="${description}"`,
});

function requireBearer(ctx: ServerContext, req: IncomingMessage, audience: string, rf: RequestFaults): void {
  const token = bearerOf(req.headers.authorization);
  if (!token) throw fail(401, 'Not authenticated', { 'www-authenticate': 'Bearer' });
  const v = verifyJwt(token, ctx.keys.signingKey, audience, ctx.ds.nowMs());
  if (ctx.revoked.has(token)) throw fail(401, 'Token revoked', wwwAuth('invalid_token', 'Token revoked'));
  if (!v.ok) {
    const text = v.reason === 'expired' ? 'Token expired' : 'Invalid token';
    throw fail(401, text, wwwAuth('invalid_token', text));
  }
  // token-expiry strikes exchanged access tokens only: the connector can exchange a new one. The
  // service-account token lives a year, and its expiry is an operator's matter (failing is right).
  const used = audience === AUD_V2 && ctx.engine.usedBefore(token);
  if (rf.expire || (rf.expireUsed && used)) {
    ctx.engine.count(rf.expire ? 'expire' : 'token-expiry');
    throw fail(401, 'Token expired', wwwAuth('invalid_token', 'Token expired'));
  }
}

function requireApiKey(ctx: ServerContext, req: IncomingMessage): void {
  const key = req.headers['x-api-key'];
  if (typeof key !== 'string' || !sameSecret(key, ctx.keys.apiKey))
    throw fail(401, 'Invalid or missing API key');
}

// ---- token exchange (RFC 8693) ------------------------------------------------------------------

async function tokenExchange(ctx: ServerContext, req: IncomingMessage, res: ServerResponse, spec: FaultSpec) {
  const oauthError = (
    status: number,
    error: string,
    description: string,
    headers: Record<string, string> = {},
  ) =>
    new HttpError(
      status,
      { error, error_description: description },
      { 'cache-control': 'no-store', ...headers },
    );
  const type = req.headers['content-type'] ?? '';
  if (!/^application\/x-www-form-urlencoded/i.test(type)) {
    throw oauthError(400, 'invalid_request', 'body must be application/x-www-form-urlencoded');
  }
  const form = new URLSearchParams((await readBody(req, 64 * 1024)).toString('utf8'));
  const grant = form.get('grant_type');
  if (!grant) throw oauthError(400, 'invalid_request', 'grant_type is required');
  if (grant !== GRANT_TOKEN_EXCHANGE)
    throw oauthError(400, 'unsupported_grant_type', 'only token exchange is supported');
  let clientId = form.get('client_id');
  let clientSecret = form.get('client_secret');
  const basic = /^Basic\s+(\S+)$/i.exec(req.headers.authorization ?? '');
  if (basic?.[1]) {
    const [id, secret] = Buffer.from(basic[1], 'base64').toString('utf8').split(':');
    clientId = decodeURIComponent(id ?? '');
    clientSecret = decodeURIComponent(secret ?? '');
  }
  if (
    !clientId ||
    !clientSecret ||
    clientId !== ctx.keys.clientId ||
    !sameSecret(clientSecret, ctx.keys.clientSecret)
  ) {
    throw oauthError(401, 'invalid_client', 'client authentication failed', { 'www-authenticate': 'Basic' });
  }
  const subject = form.get('subject_token');
  const subjectType = form.get('subject_token_type');
  if (!subject || !subjectType)
    throw oauthError(400, 'invalid_request', 'subject_token and subject_token_type are required');
  if (subjectType !== TOKEN_TYPE_JWT && subjectType !== TOKEN_TYPE_ACCESS) {
    throw oauthError(400, 'invalid_request', 'unsupported subject_token_type');
  }
  const v = verifyJwt(subject, ctx.keys.signingKey, AUD_ANALYTICS, ctx.ds.nowMs());
  if (ctx.revoked.has(subject)) throw oauthError(400, 'invalid_grant', 'subject_token rejected (revoked)');
  if (!v.ok) throw oauthError(400, 'invalid_grant', `subject_token rejected (${v.reason})`);
  const ttl = spec.ttlSec ?? ctx.accessTokenTtlSec;
  const token = issueToken(ctx.keys, AUD_V2, v.claims.sub, ctx.ds.nowMs(), ttl, ctx.ds.nextId(9));
  sendJson(
    res,
    200,
    { access_token: token, issued_token_type: TOKEN_TYPE_ACCESS, token_type: 'Bearer', expires_in: ttl },
    { 'cache-control': 'no-store' },
  );
}

// ---- analytics export ---------------------------------------------------------------------------

function dateParam(url: URL, name: string): number | undefined {
  const v = url.searchParams.get(name);
  if (v === null || v === '' || v === 'null') return undefined;
  const day = parseDay(v);
  if (day === undefined) {
    throw invalid({
      loc: ['query', name],
      msg: 'Input should be a valid date in the format YYYY-MM-DD',
      type: 'date_parsing',
    });
  }
  return day;
}

async function analytics(
  ctx: ServerContext,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  spec: FaultSpec,
  rf: RequestFaults,
) {
  requireBearer(ctx, req, AUD_ANALYTICS, rf);
  const start = dateParam(url, 'start_date');
  const end = dateParam(url, 'end_date');
  if (start !== undefined && end !== undefined && start > end) {
    throw invalid({
      loc: ['query', 'start_date'],
      msg: 'start_date must not be after end_date',
      type: 'value_error',
    });
  }
  const from = Math.max(start ?? ctx.ds.startDay, ctx.ds.startDay);
  const to = Math.min(end ?? ctx.ds.lastDay(), ctx.ds.lastDay());
  await streamExport(res, ctx.ds, { from, to }, ctx.engine, spec, rf);
}

// ---- v2 thread API ------------------------------------------------------------------------------

function resolveThread(ctx: ServerContext, id: string): ThreadRef {
  const found = ctx.ds.lookup(id);
  if (found.status !== 'ok') throw fail(404, 'Thread not found');
  if (found.thread.restricted) throw fail(403, 'You do not have access to this thread');
  return found.thread;
}

function intQuery(url: URL, name: string, def: number, min: number, max: number): number {
  const v = url.searchParams.get(name);
  if (v === null || v === '') return def;
  if (!/^-?\d+$/.test(v)) {
    throw invalid({ loc: ['query', name], msg: 'Input should be a valid integer', type: 'int_parsing' });
  }
  const n = Number(v);
  if (n < min)
    throw invalid({
      loc: ['query', name],
      msg: `Input should be greater than or equal to ${min}`,
      type: 'greater_than_equal',
    });
  if (n > max)
    throw invalid({
      loc: ['query', name],
      msg: `Input should be less than or equal to ${max}`,
      type: 'less_than_equal',
    });
  return n;
}

/** One request under /v2/threads, as its route's handler sees it. */
interface V2Call {
  ctx: ServerContext;
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  rf: RequestFaults;
  /** The path's segments after /v2/threads. */
  parts: string[];
  /** The first of them, decoded ('' on /v2/threads itself). */
  threadId: string;
}

interface V2Route {
  method: string;
  /** The OpenAPI path template: `{name}` is any one segment. */
  path: string;
  handler: (c: V2Call) => Promise<void> | void;
}

async function createThread({ ctx, req, res }: V2Call) {
  const body = await readJsonObject(req);
  const name = requiredString(body, 'thread_name');
  const live = ctx.ds.createThread(name);
  return sendJson(res, 201, {
    thread_id: live.id,
    thread_name: name,
    created_at: new Date(live.createdAt).toISOString(),
  });
}

async function renameThread({ ctx, req, res, threadId }: V2Call) {
  const ref = resolveThread(ctx, threadId);
  const body = await readJsonObject(req);
  const name = requiredString(body, 'name');
  const live = ctx.ds.liveOf(ref);
  live.name = name;
  live.renamedAt = ctx.ds.nowMs();
  return sendJson(res, 200, { thread_id: ref.id, thread_name: name });
}

function deleteThread({ ctx, res, threadId }: V2Call) {
  const ref = resolveThread(ctx, threadId);
  ctx.runner.drop(ref.id);
  ctx.ds.deleteThread(ref);
  return sendEmpty(res, 204);
}

function listMessages({ ctx, req, res, url, threadId }: V2Call) {
  const ref = resolveThread(ctx, threadId);
  const start = intQuery(url, 'start_index', 0, 0, Number.MAX_SAFE_INTEGER);
  const limit = intQuery(url, 'limit_num', HISTORY_DEFAULT_LIMIT, 1, HISTORY_MAX_LIMIT);
  const page = ctx.ds.history(ref).slice(start, start + limit);
  return sendPoisoned(ctx, res, page, requestSpec(ctx, req));
}

async function sendMessage({ ctx, req, res, threadId }: V2Call) {
  const ref = resolveThread(ctx, threadId);
  const form = await readForm(req, 1024 * 1024);
  const message = form.get('message');
  if (message === null) throw invalid({ loc: ['body', 'message'], msg: 'Field required', type: 'missing' });
  if (typeof message !== 'string') {
    throw invalid({
      loc: ['body', 'message'],
      msg: 'Input should be a valid string',
      type: 'string_type',
    });
  }
  if (message.trim() === '') {
    throw invalid({
      loc: ['body', 'message'],
      msg: 'String should have at least 1 character',
      type: 'string_too_short',
    });
  }
  if (ctx.runner.isBusy(ref.id)) throw fail(409, 'A task is already processing in this thread');
  const task = ctx.runner.start(ctx.ds.liveOf(ref), message);
  return sendJson(res, 202, {
    thread_id: ref.id,
    task_id: task.id,
    message_id: task.turn.userMessageId,
    status: 'queued',
  });
}

function threadProgress({ ctx, res, threadId }: V2Call) {
  const ref = resolveThread(ctx, threadId);
  const task = ctx.runner.current(ref.id);
  const done = task?.status === 'completed' || task?.status === 'cancelled';
  return sendJson(res, 200, {
    thread_id: ref.id,
    task_id: task?.id ?? null,
    status: task?.status ?? 'idle',
    progress: task ? (done ? 1 : task.stepsDone / task.stepsTotal) : 0,
    steps_completed: task?.stepsDone ?? 0,
    steps_total: task?.stepsTotal ?? 0,
    message_id: done ? task.replyMessageId : null,
  });
}

function cancelTask({ ctx, res, threadId }: V2Call) {
  const ref = resolveThread(ctx, threadId);
  const task = ctx.runner.cancel(ref.id);
  if (!task) throw fail(409, 'No task is processing in this thread');
  return sendJson(res, 200, {
    thread_id: ref.id,
    task_id: task.id,
    status: 'cancelled',
    message_id: task.replyMessageId,
  });
}

async function uploadFile({ ctx, req, res, threadId }: V2Call) {
  const ref = resolveThread(ctx, threadId);
  const type = req.headers['content-type'] ?? '';
  if (!/^multipart\/form-data/i.test(type)) {
    throw invalid({ loc: ['body', 'file'], msg: 'Expected multipart/form-data', type: 'missing' });
  }
  const form = await readForm(req, MAX_UPLOAD + 64 * 1024);
  const file = form.get('file');
  if (file === null || typeof file === 'string') {
    throw invalid({ loc: ['body', 'file'], msg: 'Field required (a file part)', type: 'missing' });
  }
  if (file.size > MAX_UPLOAD) throw fail(413, 'File larger than 10 MiB');
  const fileId = `file-${ctx.ds.nextId(5).replaceAll('-', '').slice(0, 16)}`;
  const entry = {
    file_id: fileId,
    file_name: file.name || 'upload',
    size_bytes: file.size,
    content_type: file.type || 'application/octet-stream',
  };
  ctx.ds.liveOf(ref).files.set(fileId, entry);
  return sendJson(res, 201, entry);
}

function getArtifact({ ctx, req, res, parts, threadId }: V2Call) {
  const artifactId = segment(itemAt(parts, 2), 'artifact_id');
  checkArtifactIds(threadId, artifactId);
  const ref = resolveThread(ctx, threadId);
  const found = ctx.ds.artifact(ref, artifactId);
  if (!found) throw fail(404, 'Artifact not found');
  return sendPoisonedArtifact(ctx, res, { artifact: found.artifact }, artifactId, requestSpec(ctx, req));
}

function streamEvents({ ctx, res, rf, threadId }: V2Call) {
  const ref = resolveThread(ctx, threadId);
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
  ctx.runner.subscribe(ref.id, res, rf.cut ? 1 + Math.floor(rf.cutFraction * 3) : undefined);
}

/**
 * The routes under /v2/threads in the order of the spec, each path as openapi.json names it. A
 * path's methods, in this order, are the `allow` header of its 405.
 */
const V2_ROUTES = (
  [
    {
      method: 'GET',
      path: '/v2/threads',
      handler: (c) => listThreads(c.ctx, c.res, requestSpec(c.ctx, c.req)),
    },
    { method: 'POST', path: '/v2/threads', handler: createThread },
    { method: 'PATCH', path: '/v2/threads/{thread_id}', handler: renameThread },
    { method: 'DELETE', path: '/v2/threads/{thread_id}', handler: deleteThread },
    { method: 'GET', path: '/v2/threads/{thread_id}/messages', handler: listMessages },
    { method: 'POST', path: '/v2/threads/{thread_id}/messages', handler: sendMessage },
    { method: 'GET', path: '/v2/threads/{thread_id}/progress', handler: threadProgress },
    { method: 'DELETE', path: '/v2/threads/{thread_id}/task', handler: cancelTask },
    { method: 'POST', path: '/v2/threads/{thread_id}/files', handler: uploadFile },
    { method: 'GET', path: '/v2/threads/{thread_id}/artifacts/{artifact_id}', handler: getArtifact },
    { method: 'GET', path: EVENTS_PATH, handler: streamEvents },
  ] satisfies V2Route[]
).map((r) => ({ ...r, shape: r.path.split('/').slice(3) })); // shape: the segments after /v2/threads

function fitsShape(shape: readonly string[], parts: readonly string[]): boolean {
  return shape.length === parts.length && shape.every((s, i) => s.startsWith('{') || s === parts[i]);
}

/**
 * The v2 thread API: the bearer token first, then the thread id (a malformed one answers 422 on
 * any path under it), then the route: 404 for no path of the table, 405 for a method it lacks.
 */
function v2(
  ctx: ServerContext,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  method: string,
  rf: RequestFaults,
) {
  const parts = url.pathname.split('/').slice(3); // after /v2/threads
  requireBearer(ctx, req, AUD_V2, rf);
  const threadId = parts.length > 0 ? segment(itemAt(parts, 0), 'thread_id') : '';
  const routes = V2_ROUTES.filter((r) => fitsShape(r.shape, parts));
  if (routes.length === 0) throw fail(404, 'Not Found');
  return route(
    method,
    routes.map((r) => r.method),
    () => routes.find((r) => r.method === method)?.handler({ ctx, req, res, url, rf, parts, threadId }),
  );
}

function checkArtifactIds(threadId: string, artifactId: string): void {
  if (!isUuid(threadId)) {
    throw invalid({ loc: ['path', 'thread_id'], msg: 'Input should be a valid UUID', type: 'uuid_parsing' });
  }
  if (!ARTIFACT_ID_RE.test(artifactId)) {
    throw invalid({
      loc: ['path', 'artifact_id'],
      msg: 'Input should match [A-Za-z0-9_-]{1,200}',
      type: 'string_pattern_mismatch',
    });
  }
}

/** The list is written entry by entry: with a large data set it holds many threads. */
async function listThreads(ctx: ServerContext, res: ServerResponse, s: FaultSpec): Promise<void> {
  res.writeHead(200, { 'content-type': 'application/json' });
  const added = s.newField?.has('thread') === true;
  const proto = s.protoKeys?.has('thread') === true;
  // With `proto-keys`, the answer's own keys come first, then the list.
  let buf = proto ? `${JSON.stringify(withProtoKeys({})).slice(0, -1)},"threads":[` : '{"threads":[';
  let first = true;
  for (const ref of ctx.ds.threads()) {
    const entry = ctx.ds.threadEntry(ref);
    const sent = added ? { ...entry, [NEW_FIELD]: NEW_FIELD_VALUE } : entry;
    buf += (first ? '' : ',') + JSON.stringify(proto ? withProtoKeys(sent) : sent);
    first = false;
    if (buf.length > 64 * 1024) {
      if (!res.write(buf)) await new Promise((r) => res.once('drain', r));
      buf = '';
    }
  }
  res.end(`${buf}]}`);
}

// ---- legacy client API --------------------------------------------------------------------------

async function legacy(
  ctx: ServerContext,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  method: string,
) {
  const art = /^\/client\/v2\/thread\/([^/]+)\/artifact\/([^/]+)$/.exec(path);
  const dyn = /^\/client\/agent\/dynamic-output\/([^/]+)$/.exec(path);
  if (!art && !dyn) throw fail(404, 'Not Found');
  return route(method, ['GET'], () => {
    requireApiKey(ctx, req);
    if (art) {
      const threadId = segment(itemAt(art, 1), 'thread_id');
      const artifactId = segment(itemAt(art, 2), 'artifact_id');
      checkArtifactIds(threadId, artifactId);
      const ref = resolveThread(ctx, threadId);
      const found = ctx.ds.artifact(ref, artifactId);
      if (!found) throw fail(404, 'Artifact not found');
      return sendPoisonedArtifact(
        ctx,
        res,
        { artifact_id: found.artifact_id, artifact: found.artifact },
        artifactId,
        requestSpec(ctx, req),
      );
    }
    const agentId = segment(itemAt(present(dyn, 'the dynamic-output match'), 1), 'agent_id');
    if (!isUuid(agentId)) {
      throw invalid({ loc: ['path', 'agent_id'], msg: 'Input should be a valid UUID', type: 'uuid_parsing' });
    }
    const rng = new Rng(hash4(ctx.ds.seed, stringHash(agentId.toLowerCase()), 0, 0xa9e7));
    return sendJson(res, 200, `Agent ${agentId.toLowerCase()} latest output: ${sentenceOf(rng, 24)}`);
  });
}

// ---- poison values --------------------------------------------------------------------------------

/** The request's fault spec (the global one with the x-sim-faults header's keys over it). */
function requestSpec(ctx: ServerContext, req: IncomingMessage): FaultSpec {
  const header = req.headers[FAULT_HEADER];
  return typeof header === 'string' && header.trim() !== ''
    ? mergeFaults(ctx.engine.spec, parseFaultSpec(header))
    : ctx.engine.spec;
}

/** A placeholder string JSON.stringify writes as is; replaced by a poison value's raw JSON. */
const POISON_MARK = '\u0001sim-poison:';

function sendWithPoison(res: ServerResponse, body: unknown): void {
  const text = JSON.stringify(body).replace(
    /"\\u0001sim-poison:(deep-nesting|huge-number)"/g,
    (_m, kind: PoisonKind) => poisonValueText(kind),
  );
  sendJsonText(res, 200, text);
}

/**
 * A page of history in which user entries chosen by the `poison-history` fault carry a value no
 * warehouse can store (a JSON document deeper than any parser should follow, or 1e200000).
 */
function sendPoisoned(ctx: ServerContext, res: ServerResponse, page: HistoryEntry[], s: FaultSpec): void {
  let body = { messages: page };
  if (s.newField?.has('history')) body.messages = page.map((e) => ({ ...e, [NEW_FIELD]: NEW_FIELD_VALUE }));
  if (s.protoKeys?.has('history')) {
    body = withProtoKeys({
      messages: body.messages.map((e) => withProtoKeys({ ...e, citations: e.citations.map(withProtoKeys) })),
    });
  }
  const p = s.poisonHistory ?? 0;
  if (p <= 0) {
    sendJson(res, 200, body);
    return;
  }
  let poisoned = 0;
  body.messages = body.messages.map((e) => {
    const kind = e.role === 'user' ? ctx.engine.poisonEntry(e.message_id, p) : undefined;
    if (!kind) return e;
    poisoned++;
    return { ...e, x_trace: `${POISON_MARK}${kind}` };
  });
  if (poisoned === 0) {
    sendJson(res, 200, body);
    return;
  }
  ctx.engine.count('poison-entry', poisoned);
  sendWithPoison(res, body);
}

function sendPoisonedArtifact(
  ctx: ServerContext,
  res: ServerResponse,
  body: { artifact: Artifact; artifact_id?: string },
  artifactId: string,
  s: FaultSpec,
): void {
  let sent = s.newField?.has('artifact')
    ? { ...body, artifact: { ...body.artifact, [NEW_FIELD]: NEW_FIELD_VALUE } }
    : body;
  if (s.protoKeys?.has('artifact')) {
    const a = sent.artifact;
    sent = withProtoKeys({
      ...sent,
      artifact: withProtoKeys({ ...a, citations: a.citations.map(withProtoKeys) }),
    });
  }
  const kind = ctx.engine.poisonArtifact(artifactId, s.poisonHistory ?? 0);
  if (!kind) {
    sendJson(res, 200, sent);
    return;
  }
  ctx.engine.count('poison-artifact');
  sendWithPoison(res, { ...sent, artifact: { ...sent.artifact, x_trace: `${POISON_MARK}${kind}` } });
}

// ---- admin ----------------------------------------------------------------------------------------

/**
 * Request arrivals of the service's endpoints (not /_sim, /healthz, /openapi.json), counted by
 * the simulator's clock: per whole second (epoch seconds, the last hour), and the most in any
 * sliding second over the last 100 000 arrivals. What a rate test asserts on: the service's view.
 */
interface Arrivals {
  add(ms: number): void;
  report(): {
    perSecond: Record<string, number>;
    maxPerSecond: number;
    maxInAnySecond: number;
    total: number;
  };
}

function createArrivals(): Arrivals {
  const perSecond = new Map<number, number>();
  const recent: number[] = [];
  let total = 0;
  return {
    add(ms) {
      total++;
      const sec = Math.floor(ms / 1000);
      perSecond.set(sec, (perSecond.get(sec) ?? 0) + 1);
      if (perSecond.size > 3600) perSecond.delete(perSecond.keys().next().value ?? sec);
      recent.push(ms);
      if (recent.length > 100_000) recent.splice(0, recent.length - 100_000);
    },
    report() {
      let maxInAnySecond = 0;
      for (let i = 0, j = 0; j < recent.length; j++) {
        while ((recent[j] ?? 0) - (recent[i] ?? 0) >= 1000) i++;
        maxInAnySecond = Math.max(maxInAnySecond, j - i + 1);
      }
      return {
        perSecond: Object.fromEntries(perSecond),
        maxPerSecond: Math.max(0, ...perSecond.values()),
        maxInAnySecond,
        total,
      };
    },
  };
}

/**
 * Switches faults from another process (a chaos run, an operator's curl): GET /_sim/faults
 * shows the spec, PUT /_sim/faults (body: a fault spec, e.g. "5xx=0.3:2,stall=0.1:90s", or
 * "none") replaces it, GET /_sim/counts gives the faults injected so far by kind, GET
 * /_sim/requests the request arrivals per second (see Arrivals). Served only when the simulator
 * is started with `admin` (crs-sync sim --admin).
 */
async function admin(
  ctx: ServerContext,
  req: IncomingMessage,
  res: ServerResponse,
  method: string,
  path: string,
  arrivals: Arrivals,
) {
  if (path === '/_sim/faults') {
    return route(method, ['GET', 'PUT'], async () => {
      if (method === 'PUT') {
        const text = (await readBody(req, 64 * 1024)).toString('utf8').trim();
        try {
          ctx.engine.spec = parseFaultSpec(text);
        } catch (err) {
          throw fail(400, (err as Error).message);
        }
      }
      return sendJson(res, 200, { faults: ctx.engine.spec });
    });
  }
  if (path === '/_sim/counts') {
    return route(method, ['GET'], () =>
      sendJson(res, 200, { counts: Object.fromEntries(ctx.engine.counts) }),
    );
  }
  if (path === '/_sim/requests') return route(method, ['GET'], () => sendJson(res, 200, arrivals.report()));
  throw fail(404, 'Not Found');
}
