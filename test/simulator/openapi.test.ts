import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Simulator, startSimulator } from '../../src/simulator/index.ts';
import {
  EVENTS_PATH,
  FAULT_HEADER,
  HISTORY_DEFAULT_LIMIT,
  HISTORY_MAX_LIMIT,
  LEGACY_PREFIX,
  TOKEN_PATH,
} from '../../src/simulator/openapi.ts';

/**
 * The OpenAPI document is a file (src/simulator/openapi.json) and the simulator's choices it states
 * are constants of the code: the document served over HTTP says what the code does, and its
 * addresses are the running simulator's.
 */

/** The parts of the document read here. */
interface Served {
  servers: unknown;
  'x-legacy-base-url': string;
  'x-token-url': string;
  info: { description: string };
  paths: Record<
    string,
    { servers?: unknown; get?: { parameters?: { name: string; schema: unknown; description?: string }[] } }
  >;
  components: { securitySchemes: { accessToken: { description: string } } };
}

let sim: Simulator;
let text: string;
let doc: Served;

beforeAll(async () => {
  sim = await startSimulator({ seed: 5 });
  const res = await fetch(`${sim.baseUrl}/openapi.json`);
  expect(res.status).toBe(200);
  text = await res.text();
  doc = JSON.parse(text) as Served;
});
afterAll(async () => {
  await sim.close();
});

describe('the OpenAPI document the simulator serves', () => {
  it('when it is served, then every address in it is the running simulator’s and no blank is left', () => {
    expect(text).not.toContain('{{');
    expect(doc.servers).toEqual([{ url: sim.baseUrl, description: '{base_url}' }]);
    expect(doc['x-legacy-base-url']).toBe(sim.legacyBaseUrl);
    expect(sim.legacyBaseUrl).toBe(`${sim.baseUrl}${LEGACY_PREFIX}`);
    expect(doc['x-token-url']).toBe(sim.tokenUrl);
    expect(doc.paths[TOKEN_PATH]?.servers).toEqual([
      { url: sim.baseUrl, description: 'token endpoint host' },
    ]);
    for (const p of [
      '/client/v2/thread/{thread_id}/artifact/{artifact_id}',
      '/client/agent/dynamic-output/{agent_id}',
    ]) {
      expect(doc.paths[p]?.servers).toEqual([{ url: sim.legacyBaseUrl, description: '{legacy_base_url}' }]);
    }
    expect(doc.components.securitySchemes.accessToken.description).toContain(
      `token exchange at ${sim.tokenUrl}.`,
    );
  });

  it('when it is read, then the history limits, the fault header and the paths it states are the code’s', () => {
    const params = doc.paths['/v2/threads/{thread_id}/messages']?.get?.parameters ?? [];
    const limit = params.find((p) => p.name === 'limit_num');
    expect(limit?.schema).toMatchObject({
      minimum: 1,
      maximum: HISTORY_MAX_LIMIT,
      default: HISTORY_DEFAULT_LIMIT,
    });
    expect(limit?.description).toContain(`default ${HISTORY_DEFAULT_LIMIT}, maximum ${HISTORY_MAX_LIMIT};`);
    expect(doc.info.description).toContain(`header \`${FAULT_HEADER}\``);
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining([TOKEN_PATH, EVENTS_PATH]));
  });

  it('when it is asked twice, then both answers are the same document', async () => {
    const again = await (await fetch(`${sim.baseUrl}/openapi.json`)).text();
    expect(again).toBe(text);
  });
});
