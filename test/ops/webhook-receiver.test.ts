import { spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/** scripts/webhook-receiver.ts, the guide's alert receiver, as a process over real HTTP. */
const script = path.resolve(import.meta.dirname, '..', '..', 'scripts', 'webhook-receiver.ts');

describe('the webhook receiver of the one-machine guide', () => {
  const child = spawn(process.execPath, [script, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let url = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString('utf8');
  });

  beforeAll(async () => {
    while (!/listening on (http:\/\/\S+?)\//.test(out)) await once(child.stdout, 'data');
    url = /listening on (http:\/\/\S+?)\//.exec(out)![1]!;
  });

  afterAll(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });

  it('when an alert is posted, then it answers 200 and prints its text on one line, control characters escaped', async () => {
    const r = await fetch(`${url}/any/secret/path`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'crs-sync [WARNING] firing x: two\nlines', event: {} }),
    });
    expect(r.status).toBe(200);
    expect(await r.text()).toBe('ok\n');
    expect(out).toMatch(/\n\S+ crs-sync \[WARNING\] firing x: two\\nlines\n/);
  });

  it('when a body is not a JSON object with a text, or the method is not POST, then it is refused with a reason', async () => {
    const bad = await fetch(url, { method: 'POST', body: 'not json' });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain('expected a JSON object with "text"');
    expect(out).toMatch(/refused: not a JSON object with a "text" \(8 bytes\)/);
    expect((await fetch(url)).status).toBe(405);
  });

  it('when it gets SIGTERM, then it says it stopped and exits 0', async () => {
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const [code] = await exited;
    expect(code).toBe(0);
    expect(out).toContain('webhook receiver stopped\n');
  });
});
