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

/** Posts `payload`; a receiver that has not answered in `timeoutMs` is cut off. Never throws. */
export async function postWebhook(url: string, payload: unknown, timeoutMs: number): Promise<WebhookAnswer> {
  try {
    const res = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': 'crs-sync-alerts' },
      body: JSON.stringify(payload),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const body = (await res.body.text()).slice(0, 200);
    if (res.statusCode >= 200 && res.statusCode < 300) return { ok: true, status: res.statusCode, body };
    return { ok: false, status: res.statusCode, body, error: `HTTP ${res.statusCode}` };
  } catch (err) {
    const timedOut = err instanceof Error && /timeout|abort/i.test(`${err.name} ${err.message}`);
    return {
      ok: false,
      status: null,
      body: '',
      // undici's messages name the host at most; the URL's path (the secret) is masked anyway.
      error: timedOut ? `no answer within ${timeoutMs} ms` : errorMessage(err).split(url).join('(webhook)'),
    };
  }
}
