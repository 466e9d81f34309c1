import type { Simulator } from '../../../src/simulator/index.ts';
import { createValidator, type Validator } from './openapi.ts';

/**
 * A tiny client for the simulator's tests: every response it reads is validated against the
 * OpenAPI document the simulator serves (fetched over HTTP, as a client would), by operation.
 */

export interface Reply {
  status: number;
  headers: Headers;
  body: unknown;
  text: string;
}

export interface Checked {
  validator: Validator;
  /** Calls `url` (relative to the base address unless absolute) and validates it as `template`. */
  call(method: string, template: string, url: string, init?: RequestInit): Promise<Reply>;
  v2: () => Record<string, string>;
  sa: () => Record<string, string>;
  legacy: () => Record<string, string>;
}

export async function checkedClient(sim: Simulator): Promise<Checked> {
  const doc = (await (await fetch(`${sim.baseUrl}/openapi.json`)).json()) as Record<string, unknown>;
  const validator = createValidator(doc);
  return {
    validator,
    async call(method, template, url, init = {}) {
      const res = await fetch(url.startsWith('http') ? url : `${sim.baseUrl}${url}`, { ...init, method });
      const text = await res.text();
      const ct = res.headers.get('content-type') ?? '';
      let body: unknown = text;
      if (ct.startsWith('application/json')) body = JSON.parse(text);
      if (ct.startsWith('application/x-ndjson')) {
        for (const line of text.split('\n').filter((l) => l !== '')) {
          validator.response(method, template, res.status, ct, JSON.parse(line));
        }
      } else if (ct.startsWith('text/event-stream')) {
        for (const ev of parseSse(text)) validator.sseEvent(template, ev.event, ev.data);
      } else {
        validator.response(method, template, res.status, ct, text === '' ? undefined : body);
      }
      return { status: res.status, headers: res.headers, body, text };
    },
    v2: () => ({ authorization: `Bearer ${sim.credentials.accessToken}` }),
    sa: () => ({ authorization: `Bearer ${sim.credentials.serviceAccountToken}` }),
    legacy: () => ({ 'x-api-key': sim.credentials.apiKey }),
  };
}

export interface SseMessage {
  event: string;
  id: string;
  data: unknown;
}

export function parseSse(text: string): SseMessage[] {
  const out: SseMessage[] = [];
  for (const block of text.split('\n\n')) {
    if (block.trim() === '') continue;
    let event = 'message';
    let id = '';
    let data = '';
    for (const line of block.split('\n')) {
      if (line.startsWith('event: ')) event = line.slice(7);
      else if (line.startsWith('id: ')) id = line.slice(4);
      else if (line.startsWith('data: ')) data += line.slice(6);
    }
    out.push({ event, id, data: JSON.parse(data) });
  }
  return out;
}

/** A clock the tests move by hand; the simulator reads it for arrival, expiry and deletion. */
export function manualClock(start: string): {
  now: () => Date;
  set: (iso: string) => void;
  advance: (ms: number) => void;
} {
  let t = Date.parse(start);
  return {
    now: () => new Date(t),
    set: (iso) => {
      t = Date.parse(iso);
    },
    advance: (ms) => {
      t += ms;
    },
  };
}
