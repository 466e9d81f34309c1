/**
 * Who may read the dashboard. Every answer holds user ids, thread names and quarantined raw
 * lines, so:
 *
 * - the `Host` of a request must name this server: its bound address and port (and `localhost`
 *   when bound to loopback; every address of the machine when bound to all of them), or a name
 *   of `CRS_DASHBOARD_ALLOWED_HOSTS`. A page of another site that rebinds its own name to this
 *   address (DNS rebinding) sends its own name, and is refused (421);
 * - an `Origin`, when a browser sends one, must be this server too (403): no other site's script
 *   gets to send anything here;
 * - bound to anything but loopback, every request but `/healthz` must carry `CRS_DASHBOARD_TOKEN`,
 *   as a bearer token or as the password of basic auth (a browser asks for it), compared in
 *   constant time; without the setting the dashboard does not start.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type http from 'node:http';
import { isIP } from 'node:net';
import os from 'node:os';

export const TOKEN_SETTING = 'CRS_DASHBOARD_TOKEN';
export const HOSTS_SETTING = 'CRS_DASHBOARD_ALLOWED_HOSTS';

export interface AccessRules {
  /** Host header values accepted, lower case (`name:port`, IPv6 in brackets). */
  hosts: Set<string>;
  token?: string;
  /** Shown in a refusal: the address to use instead. */
  url: string;
}

export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || (isIP(h) === 4 && h.startsWith('127.'));
}

const WILDCARDS = new Set(['0.0.0.0', '::', '']);

function hostPort(host: string, port: number): string {
  const h = host.toLowerCase();
  return `${isIP(h) === 6 ? `[${h}]` : h}:${port}`;
}

/**
 * An entry of the allow-list as a Host value: `name` or `name:port` (`[v6]` or `[v6]:port`);
 * without a port, the dashboard's own.
 */
function allowed(entry: string, port: number): string {
  const e = entry.trim().toLowerCase();
  if (isIP(e) === 6) return `[${e}]:${port}`;
  return /:\d+$/.test(e) ? e : `${e}:${port}`;
}

/** The accepted Host values of a server bound to `host`:`port`, with the allow-list's entries. */
export function accessRules(o: {
  host: string;
  port: number;
  allowedHosts?: string[];
  token?: string;
}): AccessRules {
  const hosts = new Set<string>();
  const names: string[] = [o.host];
  if (WILDCARDS.has(o.host)) {
    names.push('localhost');
    for (const list of Object.values(os.networkInterfaces()))
      for (const a of list ?? []) names.push(a.address.replace(/%.*$/, ''));
  } else if (isLoopback(o.host)) {
    names.push('localhost', '127.0.0.1', '::1');
  }
  for (const n of names) if (!WILDCARDS.has(n)) hosts.add(hostPort(n, o.port));
  for (const e of o.allowedHosts ?? []) if (e.trim()) hosts.add(allowed(e, o.port));
  const shown = WILDCARDS.has(o.host) ? hostPort('127.0.0.1', o.port) : hostPort(o.host, o.port);
  return { hosts, token: o.token || undefined, url: `http://${shown}` };
}

/** A comma-separated allow-list setting as its entries. */
export function parseHostList(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

export type Refusal = { status: number; message: string; headers?: Record<string, string> };

function sameToken(given: string, token: string): boolean {
  // Digests of equal length, so that neither the comparison nor its length check tells anything.
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(token).digest();
  return timingSafeEqual(a, b);
}

function presentedToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const [scheme, value = ''] = header.trim().split(/\s+/, 2);
  if (scheme?.toLowerCase() === 'bearer') return value;
  if (scheme?.toLowerCase() === 'basic') {
    const decoded = Buffer.from(value, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    return colon < 0 ? undefined : decoded.slice(colon + 1);
  }
  return undefined;
}

/** Why a request is refused, or null when it may go on (see the module comment). */
export function refusal(rules: AccessRules, req: http.IncomingMessage, path: string): Refusal | null {
  const raw = (req.headers.host ?? '').toLowerCase();
  // A Host without a port is port 80's (RFC 9110 4.2.1).
  const host = raw && !/:\d+$/.test(raw) ? `${raw}:80` : raw;
  if (!rules.hosts.has(host)) {
    return {
      status: 421,
      message:
        `this dashboard answers at ${rules.url} only, not to the host ${JSON.stringify(req.headers.host ?? '')}: ` +
        `another site's page may not read it. To reach it under another name, add that name to ${HOSTS_SETTING}`,
    };
  }
  if (rules.token && path !== '/healthz') {
    const given = presentedToken(req.headers.authorization);
    if (given === undefined || !sameToken(given, rules.token)) {
      return {
        status: 401,
        message: `this dashboard needs ${TOKEN_SETTING}: send it as a bearer token, or as the password of basic auth (any user name)`,
        headers: { 'www-authenticate': 'Basic realm="crs-sync dashboard", charset="UTF-8"' },
      };
    }
  }
  const origin = req.headers.origin;
  if (origin !== undefined) {
    let ok = false;
    try {
      const u = new URL(origin);
      ok = u.protocol === 'http:' && rules.hosts.has(`${u.hostname}:${u.port || '80'}`);
    } catch {}
    if (!ok) {
      return {
        status: 403,
        message: `a request from the origin ${JSON.stringify(origin)} is refused: only pages of ${rules.url} may send one`,
      };
    }
  }
  return null;
}
