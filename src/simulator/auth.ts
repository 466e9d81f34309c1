import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Credentials of the simulator (spec §5): service-account JWTs for the export, access tokens from
 * RFC 8693 token exchange for the v2 API, and x-api-key for the legacy API. All are derived from
 * the seed, so a restarted simulator with the same seed accepts the same credentials. JWTs are
 * HS256; the audience tells a service-account token from an access token, so neither opens the
 * other's door.
 */

export const AUD_ANALYTICS = 'crs-analytics';
export const AUD_V2 = 'crs-v2';
export const ISSUER = 'crs-simulator';
export const GRANT_TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const TOKEN_TYPE_JWT = 'urn:ietf:params:oauth:token-type:jwt';
export const TOKEN_TYPE_ACCESS = 'urn:ietf:params:oauth:token-type:access_token';

export interface JwtClaims {
  iss: string;
  sub: string;
  aud: string;
  iat: number;
  exp: number;
  jti?: string;
  [k: string]: unknown;
}

export interface Keys {
  signingKey: Buffer;
  clientId: string;
  clientSecret: string;
  apiKey: string;
  serviceAccount: string;
}

export function deriveKeys(seed: number): Keys {
  const d = (label: string) => createHash('sha256').update(`crs-sim:${seed}:${label}`).digest();
  return {
    signingKey: d('signing'),
    clientId: 'crs-sim-client',
    clientSecret: `sim-secret-${d('client').toString('hex').slice(0, 32)}`,
    apiKey: `sim-key-${d('api').toString('hex').slice(0, 32)}`,
    serviceAccount: `service-account-${d('sa').toString('hex').slice(0, 8)}`,
  };
}

/**
 * The `n`th replacement of a secret (`clientSecret` or `apiKey`) after a rotation: derived from
 * the seed too, so that it differs from every earlier one and a run can be repeated.
 */
export function rotatedSecret(seed: number, kind: 'clientSecret' | 'apiKey', n: number): string {
  const hex = createHash('sha256').update(`crs-sim:${seed}:${kind}:rotated:${n}`).digest('hex').slice(0, 32);
  return kind === 'clientSecret' ? `sim-secret-${hex}` : `sim-key-${hex}`;
}

const b64url = (buf: Buffer | string) => Buffer.from(buf).toString('base64url');

export function signJwt(claims: JwtClaims, key: Buffer): string {
  const head = b64url(JSON.stringify({ alg: 'HS256', typ: 'JWT' }));
  const body = b64url(JSON.stringify(claims));
  const sig = createHmac('sha256', key).update(`${head}.${body}`).digest('base64url');
  return `${head}.${body}.${sig}`;
}

export type VerifyResult =
  | { ok: true; claims: JwtClaims }
  | { ok: false; reason: 'malformed' | 'signature' | 'audience' | 'expired' };

export function verifyJwt(token: string, key: Buffer, audience: string, nowMs: number): VerifyResult {
  const parts = token.split('.');
  if (parts.length !== 3) return { ok: false, reason: 'malformed' };
  const [head, body, sig] = parts as [string, string, string];
  const expected = createHmac('sha256', key).update(`${head}.${body}`).digest();
  const given = Buffer.from(sig, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected))
    return { ok: false, reason: 'signature' };
  let claims: JwtClaims;
  try {
    const header = JSON.parse(Buffer.from(head, 'base64url').toString('utf8')) as { alg?: string };
    if (header.alg !== 'HS256') return { ok: false, reason: 'malformed' };
    claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as JwtClaims;
  } catch {
    return { ok: false, reason: 'malformed' };
  }
  if (claims.aud !== audience) return { ok: false, reason: 'audience' };
  if (typeof claims.exp !== 'number' || claims.exp * 1000 <= nowMs) return { ok: false, reason: 'expired' };
  return { ok: true, claims };
}

export function issueToken(
  keys: Keys,
  audience: string,
  sub: string,
  nowMs: number,
  ttlSec: number,
  jti?: string,
): string {
  const iat = Math.floor(nowMs / 1000);
  const claims: JwtClaims = { iss: ISSUER, sub, aud: audience, iat, exp: iat + ttlSec };
  if (jti) claims.jti = jti;
  return signJwt(claims, keys.signingKey);
}

export function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The token of an `Authorization: Bearer ...` header, or undefined. */
export function bearerOf(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m?.[1];
}
