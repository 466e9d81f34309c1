import { createHash } from 'node:crypto';
import { request } from 'undici';
import { errorMessage } from '../errors.ts';

/**
 * One POST of JSON to a webhook. A webhook URL is a credential (Slack's path is the secret): it is
 * never logged, stored or shown whole; the warehouse keeps a digest (`targetOf`), people see the
 * scheme and host (`describeTarget`).
 */

/** What a receiver answered: its status and the start of its body; or why there was no answer. */
export type WebhookAnswer =
  | { ok: true; status: number; body: string }
  | { ok: false; status: number | null; body: string; error: string };

/** A receiver's id in the warehouse: a digest of its URL. */
export function targetOf(url: string): string {
  return createHash('sha256').update(url).digest('hex').slice(0, 16);
}

/** The URL as people may see it: `https://hooks.slack.com/…`. */
export function describeTarget(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}/…`;
  } catch {
    return '(not a URL)';
  }
}

/** The most of a receiver's answer read: the rest is never read (a receiver may answer anything). */
export const MAX_ANSWER_BYTES = 4096;
/** The most of it kept and shown. */
const ANSWER_CHARS = 200;

/**
 * Reads at most `max` bytes of a body, then drops the rest: the connection is cut rather than a
 * huge answer read (or buffered) to the end.
 */
async function readStart(body: AsyncIterable<Buffer> & { destroy(): unknown }, max: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    n += chunk.length;
    if (n >= max) break;
  }
  body.destroy();
  return Buffer.concat(chunks).subarray(0, max);
}

/**
 * Posts `payload`; a receiver that has not answered in `timeoutMs` is cut off, and so is one
 * still answering when `signal` aborts (a worker stopping: its reason is the error). At most
 * MAX_ANSWER_BYTES of the answer are read. Never throws.
 */
export async function postWebhook(
  url: string,
  payload: unknown,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<WebhookAnswer> {
  const timeout = AbortSignal.timeout(timeoutMs);
  try {
    const res = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': 'crs-sync-alerts' },
      body: JSON.stringify(payload),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: signal ? AbortSignal.any([timeout, signal]) : timeout,
    });
    const body = (await readStart(res.body, MAX_ANSWER_BYTES)).toString('utf8').slice(0, ANSWER_CHARS);
    if (res.statusCode >= 200 && res.statusCode < 300) return { ok: true, status: res.statusCode, body };
    return { ok: false, status: res.statusCode, body, error: `HTTP ${res.statusCode}` };
  } catch (err) {
    if (signal?.aborted && !timeout.aborted)
      return { ok: false, status: null, body: '', error: String(signal.reason) };
    const timedOut =
      timeout.aborted || (err instanceof Error && /timeout|abort/i.test(`${err.name} ${err.message}`));
    return {
      ok: false,
      status: null,
      body: '',
      // undici's messages name the host at most; the URL's path (the secret) is masked anyway.
      error: timedOut ? `no answer within ${timeoutMs} ms` : errorMessage(err).split(url).join('(webhook)'),
    };
  }
}
