/**
 * The OpenAPI 3.1 document of the Conversational Research Service, as the simulator serves it at
 * `/openapi.json`: openapi.json next to this file, written from the service's specification
 * (restated in docs/service-contract.md). Where the spec says "not shown", the simulator made a
 * choice; every such place carries `x-simulator-choice: true` and a description saying so, so a
 * reader can tell the spec apart from the simulator. The simulator's own tests validate its real
 * responses against the served document (test/simulator/support/openapi.ts).
 *
 * The file holds the document whole, repeated responses (401/403/404 of a thread, 429 and 5XX of
 * the faults) and parameters written out at each operation as served, the schemas as `$ref`s to
 * `components/schemas`. Its only blanks are the addresses, known once the server listens:
 * `{{baseUrl}}`, `{{legacyBaseUrl}}`, `{{tokenUrl}}` and `{{tokenHost}}` (the token address less
 * its path). OpenAPI 3.1 has no way to type the lines of a JSONL body (3.2's itemSchema): the
 * export's `x-item-schema` carries the schema of each line, and `x-sse-events` the payload of each
 * event of the SSE stream.
 *
 * The constants below are the simulator's choices the document states (the history's limits, the
 * fault header, the token, legacy and events paths); test/simulator/openapi.test.ts holds the two
 * in step.
 */
import { readFileSync } from 'node:fs';

export interface OpenApiAddresses {
  baseUrl: string;
  legacyBaseUrl: string;
  tokenUrl: string;
}

/** Defaults and limits of the history query (spec §4.6/§8: not shown; the simulator's choice). */
export const HISTORY_DEFAULT_LIMIT = 50;
export const HISTORY_MAX_LIMIT = 100;
/** Header that switches faults on for one request (simulator only). */
export const FAULT_HEADER = 'x-sim-faults';
/** Path of the token-exchange endpoint under the base address (spec §5: not shown). */
export const TOKEN_PATH = '/oauth/token';
/** Path prefix of the legacy client API under the simulator's address (spec: not shown). */
export const LEGACY_PREFIX = '/legacy';
/** Path of the SSE thread event stream (spec §4.11: not shown). */
export const EVENTS_PATH = '/v2/threads/{thread_id}/events';

type Json = Record<string, unknown>;

const DOCUMENT_FILE = new URL('./openapi.json', import.meta.url);
let documentText: string | undefined;

const BLANK = /\{\{(\w+)\}\}/g;

/** A copy of `node` with each blank of its strings filled in from `values`. */
function fill(node: unknown, values: Readonly<Record<string, string>>): unknown {
  if (typeof node === 'string') {
    return node.replace(BLANK, (_, name: string) => {
      const v = values[name];
      if (v === undefined) throw new Error(`openapi.json: unknown blank {{${name}}}`);
      return v;
    });
  }
  if (Array.isArray(node)) return node.map((x) => fill(x, values));
  if (node !== null && typeof node === 'object') {
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, fill(v, values)]));
  }
  return node;
}

/** The simulator's OpenAPI document (openapi.json, read once), its addresses filled in. */
export function buildOpenApiDocument(addr: OpenApiAddresses): Json {
  documentText ??= readFileSync(DOCUMENT_FILE, 'utf8');
  return fill(JSON.parse(documentText), {
    baseUrl: addr.baseUrl,
    legacyBaseUrl: addr.legacyBaseUrl,
    tokenUrl: addr.tokenUrl,
    tokenHost: addr.tokenUrl.replace(/\/oauth\/token$/, ''),
  }) as Json;
}
