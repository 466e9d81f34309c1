import type { IncomingMessage, ServerResponse } from 'node:http';

/** Small helpers of the simulator's node:http server; error bodies are FastAPI-like (openapi.ts). */

export interface ValidationIssue {
  loc: Array<string | number>;
  msg: string;
  type: string;
}

export class HttpError extends Error {
  readonly status: number;
  readonly body: unknown;
  readonly headers: Record<string, string>;
  constructor(status: number, body: unknown, headers: Record<string, string> = {}) {
    super(`HTTP ${status}`);
    this.status = status;
    this.body = body;
    this.headers = headers;
  }
}

export const fail = (status: number, detail: string, headers?: Record<string, string>) =>
  new HttpError(status, { detail }, headers);

export const invalid = (...issues: ValidationIssue[]) => new HttpError(422, { detail: issues });

const held = new WeakMap<ServerResponse, Promise<void>>();

/**
 * The latency fault: the answer is computed at once and written when `gate` settles, so a
 * response takes the configured latency from the request's arrival, not latency plus the time
 * the simulator spends computing it (which, with several requests in flight, was 3-6 ms on top
 * of a 10 ms latency).
 */
export function holdResponse(res: ServerResponse, gate: Promise<void>): void {
  held.set(res, gate);
}

function whenReleased(res: ServerResponse, write: () => void): void {
  const gate = held.get(res);
  if (gate) gate.then(write, write);
  else write();
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  whenReleased(res, () => {
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
      ...headers,
    });
    res.end(text);
  });
}

/** A JSON body already rendered (a poison value JSON.stringify cannot write). */
export function sendJsonText(res: ServerResponse, status: number, text: string): void {
  whenReleased(res, () => {
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  });
}

export function sendEmpty(res: ServerResponse, status: number): void {
  whenReleased(res, () => {
    res.writeHead(status);
    res.end();
  });
}

/** Reads a request body up to `limit` bytes; beyond it answers 413 (the simulator's choice). */
export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw fail(413, `request body larger than ${limit} bytes`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

export async function readJsonObject(req: IncomingMessage): Promise<Record<string, unknown>> {
  const buf = await readBody(req, 1024 * 1024);
  let value: unknown;
  try {
    value = JSON.parse(buf.toString('utf8'));
  } catch {
    throw invalid({ loc: ['body'], msg: 'JSON decode error', type: 'json_invalid' });
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw invalid({ loc: ['body'], msg: 'Input should be a valid dictionary', type: 'dict_type' });
  }
  return value as Record<string, unknown>;
}

/** Parses form-encoded or multipart bodies with the platform's own Request.formData(). */
export async function readForm(req: IncomingMessage, limit: number): Promise<FormData> {
  const buf = await readBody(req, limit);
  const type = req.headers['content-type'] ?? '';
  if (!/^(application\/x-www-form-urlencoded|multipart\/form-data)/i.test(type)) {
    throw invalid({ loc: ['body'], msg: 'Expected form data', type: 'model_attributes_type' });
  }
  try {
    return await new Request('http://sim.invalid/', {
      method: 'POST',
      headers: { 'content-type': type },
      body: buf,
    }).formData();
  } catch {
    throw invalid({ loc: ['body'], msg: 'Malformed form data', type: 'value_error' });
  }
}

export function requiredString(obj: Record<string, unknown>, field: string): string {
  const v = obj[field];
  if (v === undefined) throw invalid({ loc: ['body', field], msg: 'Field required', type: 'missing' });
  if (typeof v !== 'string')
    throw invalid({ loc: ['body', field], msg: 'Input should be a valid string', type: 'string_type' });
  return v;
}
