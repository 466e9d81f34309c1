import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

/**
 * Validates real responses of the simulator against the OpenAPI document it serves, with ajv
 * (JSON Schema 2020-12, the dialect of OpenAPI 3.1). The document is registered whole, so a
 * response schema is checked by a JSON pointer into it and every $ref resolves as written.
 */

type Json = Record<string, unknown>;

const DOC_ID = 'https://crs-sync.invalid/openapi.json';

const pointer = (...parts: string[]) =>
  parts.map((p) => p.replaceAll('~', '~0').replaceAll('/', '~1')).join('/');

export interface Validator {
  /** Throws unless `body` matches the documented response of (method, path template, status). */
  response(method: string, path: string, status: number, contentType: string, body: unknown): void;
  /** Throws unless a documented response header matches. */
  header(method: string, path: string, status: number, name: string, value: string | null): void;
  /** Validates a value against a named component schema. */
  component(name: string, value: unknown): void;
  /** Validates one SSE event payload against the schema named for its event. */
  sseEvent(path: string, event: string, data: unknown): void;
  /**
   * Checks every schema of the document (parameters, bodies, responses, headers, events,
   * components) against the JSON Schema 2020-12 meta-schema and compiles it, so that every $ref
   * resolves; returns the JSON pointers checked.
   */
  checkAllSchemas(): string[];
}

/** JSON pointers of every schema the document holds. */
function schemaPointers(doc: Json): string[] {
  const out: string[] = [];
  const walk = (node: unknown, at: string[]) => {
    if (node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) {
      node.forEach((v, i) => {
        walk(v, [...at, String(i)]);
      });
      return;
    }
    for (const [k, v] of Object.entries(node as Json)) {
      const here = [...at, k];
      if ((k === 'schema' || k === 'x-item-schema') && v && typeof v === 'object') out.push(pointer(...here));
      else if ((at.at(-1) === 'schemas' && at.at(-2) === 'components') || at.at(-1) === 'x-sse-events') {
        out.push(pointer(...here));
      } else walk(v, here);
    }
  };
  walk(doc, []);
  return out;
}

function at(doc: Json, ptr: string): unknown {
  return ptr
    .split('/')
    .map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~'))
    .reduce<unknown>((node, key) => (node as Json)[key], doc);
}

export function createValidator(doc: Json): Validator {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
  addFormats.default(ajv);
  ajv.addSchema({ ...doc, $id: DOC_ID });
  const compiled = new Map<string, ReturnType<typeof ajv.compile>>();
  const check = (ptr: string, value: unknown, what: string) => {
    let fn = compiled.get(ptr);
    if (!fn) {
      fn = ajv.compile({ $ref: `${DOC_ID}#/${ptr}` });
      compiled.set(ptr, fn);
    }
    if (!fn(value)) {
      throw new Error(
        `${what} does not match the OpenAPI document: ${ajv.errorsText(fn.errors)}\n${JSON.stringify(value).slice(0, 500)}`,
      );
    }
  };
  const paths = doc.paths as Record<string, Record<string, Json>>;
  const responseKey = (method: string, path: string, status: number): string => {
    const op = paths[path]?.[method.toLowerCase()];
    if (!op) throw new Error(`operation ${method} ${path} is not in the OpenAPI document`);
    const responses = op.responses as Json;
    const key = [String(status), `${String(status)[0]}XX`, 'default'].find((k) => k in responses);
    if (!key) throw new Error(`status ${status} of ${method} ${path} is not documented`);
    return key;
  };
  return {
    response(method, path, status, contentType, body) {
      const key = responseKey(method, path, status);
      const ct = contentType.split(';')[0]!.trim();
      const content = ((paths[path]![method.toLowerCase()]!.responses as Json)[key] as Json).content as
        | Json
        | undefined;
      if (!content) {
        if (body !== undefined && body !== '')
          throw new Error(`${method} ${path} ${status} documents no body`);
        return;
      }
      if (!(ct in content))
        throw new Error(`${method} ${path} ${status}: content type ${ct} is not documented`);
      const media = content[ct] as Json;
      const field = 'x-item-schema' in media ? 'x-item-schema' : 'schema';
      check(
        pointer('paths', path, method.toLowerCase(), 'responses', key, 'content', ct, field),
        body,
        `${method} ${path} ${status}`,
      );
    },
    header(method, path, status, name, value) {
      const key = responseKey(method, path, status);
      const headers = ((paths[path]![method.toLowerCase()]!.responses as Json)[key] as Json).headers as
        | Json
        | undefined;
      const h = headers?.[name] as Json | undefined;
      if (!h) throw new Error(`header ${name} of ${method} ${path} ${status} is not documented`);
      if (value === null) throw new Error(`header ${name} missing from ${method} ${path} ${status}`);
      check(
        pointer('paths', path, method.toLowerCase(), 'responses', key, 'headers', name, 'schema'),
        value,
        `header ${name}`,
      );
    },
    component(name, value) {
      check(pointer('components', 'schemas', name), value, name);
    },
    checkAllSchemas() {
      const meta = new Ajv2020({ strict: false });
      const ptrs = schemaPointers(doc);
      for (const ptr of ptrs) {
        if (!meta.validateSchema(at(doc, ptr) as Json)) {
          throw new Error(
            `schema at ${ptr} is not valid JSON Schema 2020-12: ${meta.errorsText(meta.errors)}`,
          );
        }
        ajv.compile({ $ref: `${DOC_ID}#/${ptr}` });
      }
      return ptrs;
    },
    sseEvent(path, event, data) {
      const media = (((paths[path]!.get!.responses as Json)['200'] as Json).content as Json)[
        'text/event-stream'
      ] as Json;
      const events = media['x-sse-events'] as Json;
      if (!(event in events)) throw new Error(`SSE event ${event} is not documented`);
      check(
        pointer(
          'paths',
          path,
          'get',
          'responses',
          '200',
          'content',
          'text/event-stream',
          'x-sse-events',
          event,
        ),
        data,
        `SSE ${event}`,
      );
    },
  };
}
