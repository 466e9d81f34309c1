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
  /**
   * What the receiver printed once `re` is in it: its answer to a request can reach the test
   * before its line reaches the pipe (a busy machine), so the line is waited for (at most 10 s).
   */
  const printed = async (re: RegExp): Promise<string> => {
    const deadline = Date.now() + 10_000;
    while (!re.test(out) && Date.now() < deadline) {
      await Promise.race([once(child.stdout, 'data'), new Promise((r) => setTimeout(r, 100))]);
    }
    return out;
  };

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
    const alert = /\n\S+ crs-sync \[WARNING\] firing x: two\\nlines\n/;
    expect(await printed(alert)).toMatch(alert);
  });

  it('when a body is not a JSON object with a text, or the method is not POST, then it is refused with a reason', async () => {
    const bad = await fetch(url, { method: 'POST', body: 'not json' });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain('expected a JSON object with "text"');
    const refused = /refused: not a JSON object with a "text" \(8 bytes\)/;
    expect(await printed(refused)).toMatch(refused);
    expect((await fetch(url)).status).toBe(405);
  });

  it('when it gets SIGTERM, then it says it stopped and exits 0', async () => {
    // 'close': after its output has all been read too ('exit' may come first).
    const exited = once(child, 'close');
    child.kill('SIGTERM');
    const [code] = await exited;
    expect(code).toBe(0);
    expect(out).toContain('webhook receiver stopped\n');
  });
});
