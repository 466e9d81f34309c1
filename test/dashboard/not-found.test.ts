import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Dashboard, startDashboard } from '../../src/dashboard/server.ts';
import { createTestWarehouse, type TestWarehouse } from '../helpers/warehouse.ts';

/**
 * Addresses the dashboard does not serve, over real HTTP: a script reading `/api/` gets JSON it
 * can parse whatever it asks for; a browser gets the HTML page that lists the pages. No data is
 * needed for either, so the warehouse is an empty migrated schema.
 */

let tw: TestWarehouse;
let dash: Dashboard;

beforeAll(async () => {
  tw = await createTestWarehouse();
  dash = await startDashboard({ pool: tw.w.pool, port: 0 });
});

afterAll(async () => {
  await dash?.close();
  await tw?.dispose();
});

describe('the dashboard, asked for an address it does not serve', () => {
  it('when an unknown /api/ address is asked for, then the answer is a JSON 404 naming the addresses that exist', async () => {
    for (const target of ['/api/nope', '/api/', '/api', '/api/usage/extra', '/api/nope.json']) {
      const r = await fetch(`${dash.url}${target}`);
      expect([target, r.status]).toEqual([target, 404]);
      expect(r.headers.get('content-type'), target).toBe('application/json; charset=utf-8');
      const body = (await r.json()) as { error: string; path: string; pages: string[] };
      expect(body.error).toBe('not found');
      expect(body.path).toBe(target);
      expect(body.pages).toContain('/api/health');
    }
  });

  it('when an unknown page is asked for, then the answer stays the HTML 404 page', async () => {
    const r = await fetch(`${dash.url}/nope`);
    expect(r.status).toBe(404);
    expect(r.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(await r.text()).toContain('there is no page /nope');
  });
});
