import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Writable } from 'node:stream';
import { AUD_ANALYTICS, AUD_V2, deriveKeys, issueToken, rotatedSecret } from './auth.ts';
import type { ArtifactRef, HistoryEntry } from './content.ts';
import { Dataset, type ThreadEntry } from './dataset.ts';
import { FaultEngine, type FaultKind, type FaultSpec, parseFaultSpec } from './faults.ts';
import { buildOpenApiDocument, LEGACY_PREFIX, TOKEN_PATH } from './openapi.ts';
import { DAY_MS, dayOf, dayToString, parseDay } from './plan.ts';
import { createHandler } from './server.ts';
import { TaskRunner } from './tasks.ts';
import { ByteWriter } from './text.ts';

export type { Artifact, ArtifactRef, Citation, HistoryEntry } from './content.ts';
export type { ThreadEntry } from './dataset.ts';
export type { FaultKind, FaultSpec, TruncateVariant } from './faults.ts';
export { FAULT_SPEC_HELP, parseFaultSpec, TRUNCATE_VARIANTS } from './faults.ts';
export { buildOpenApiDocument } from './openapi.ts';

export const DEFAULT_SEED = 42;
export const DEFAULT_DAYS = 7;
export const DEFAULT_RECORDS_PER_DAY = 300;
export const DEFAULT_USERS = 400;

export interface SimulatorOptions {
  /** 0 (default) picks a free port. */
  port?: number;
  host?: string;
  seed?: number;
  /** Days of data before today (UTC); today also fills as time passes. */
  days?: number;
  recordsPerDay?: number;
  users?: number;
  faults?: FaultSpec | string;
  /** Clock of the simulator (record arrival, token expiry, deletions); default: the real clock. */
  now?: () => Date;
  /** Delay between the steps of a task started by "send message" (default 25 ms). */
  taskStepMs?: number;
  /** Lifetime of exchanged access tokens (default 3600 s; the fault `ttl` overrides it). */
  accessTokenTtlSec?: number;
  /** How the latency fault waits (default: a timer); tests may observe it. */
  sleep?: (ms: number) => Promise<void>;
  /** Serve /_sim/faults and /_sim/counts, so another process can switch faults (default off). */
  admin?: boolean;
}

/** One record of the analytics export (spec §2), possibly with extra keys. */
export interface AnalyticsRecord {
  Input: string;
  Response: string;
  'Message ID': string;
  'Message Time': string;
  'Thread ID': string;
  'User ID': string;
  [extra: string]: unknown;
}

/** What the service holds, computed the same way the simulator serves it: what tests compare against. */
export interface GroundTruth {
  /** Records of one UTC day's export as served now (no faults), in serving order. */
  exportDay(day: string): AnalyticsRecord[];
  /** The same as raw lines, byte-identical to what the export sends (without faults). */
  exportDayLines(day: string): string[];
  /** Days (YYYY-MM-DD) that can hold data: the first data day through today. */
  days(): string[];
  /** Full history of a thread, or undefined when it is unknown or deleted. Restricted threads included. */
  threadHistory(threadId: string): HistoryEntry[] | undefined;
  artifact(threadId: string, artifactId: string): ArtifactRef | undefined;
  /** Every thread that exists and is not deleted (as the list endpoint gives it). */
  threads(): ThreadEntry[];
  isDeleted(threadId: string): boolean;
  /** Whether the v2 API answers 403 for this thread. */
  isRestricted(threadId: string): boolean;
  /**
   * The poison lines a day's export carries under the current `poison` fault (none without it):
   * a correct loader quarantines each and loads none. Not part of exportDay/exportDayLines.
   */
  poisonLines(day: string): string[];
  /** Message ids of the history entries that carry an unstorable value under `poison-history`. */
  poisonEntries(threadId: string): string[];
  /** Ids of the thread's artifacts that carry an unstorable value under `poison-history`. */
  poisonArtifacts(threadId: string): string[];
}

export interface SimulatorCredentials {
  serviceAccountToken: string;
  clientId: string;
  clientSecret: string;
  apiKey: string;
  /** A ready-made, long-lived (30 days) v2 access token, for the static-token mode of a client. */
  accessToken: string;
}

/** A credential `rotateCredential` can replace: a field of `SimulatorCredentials`. */
export type RotatableCredential = 'serviceAccountToken' | 'accessToken' | 'clientSecret' | 'apiKey';

export interface Simulator {
  baseUrl: string;
  legacyBaseUrl: string;
  tokenUrl: string;
  port: number;
  seed: number;
  credentials: SimulatorCredentials;
  /** The CRS_* variables a client needs. */
  env(): Record<string, string>;
  /**
   * Replaces a credential, as an operator rotating it at the service would: the new one is in
   * `credentials` and `env()` from now on, and is returned; the one it replaces is refused (401,
   * and at the token endpoint `invalid_client` or `invalid_grant`). Tokens already exchanged stay
   * valid until they expire.
   */
  rotateCredential(kind: RotatableCredential): string;
  truth: GroundTruth;
  dataset: Dataset;
  setFaults(spec: FaultSpec | string): void;
  faults(): FaultSpec;
  /** Faults injected since start, by kind. */
  faultCounts(): Partial<Record<FaultKind, number>>;
  /** Forgets how often each URL was asked, so that `5xx` bursts strike URLs asked before again. */
  restartFaultBursts(): void;
  openapi(): Record<string, unknown>;
  close(): Promise<void>;
}

function toDay(day: string): number {
  const d = parseDay(day);
  if (d === undefined) throw new Error(`not a date (YYYY-MM-DD): ${day}`);
  return d;
}

/** `engine`: the fault engine whose poison faults the truth describes (none: no poison). */
export function createTruth(ds: Dataset, engine?: FaultEngine): GroundTruth {
  const lines = (day: string) => [...ds.exportLines(toDay(day))];
  const historyOf = (id: string) => {
    const found = ds.lookup(id);
    return found.status === 'ok' ? ds.history(found.thread) : undefined;
  };
  return {
    exportDayLines: lines,
    exportDay: (day) => lines(day).map((l) => JSON.parse(l) as AnalyticsRecord),
    days: () => {
      const out: string[] = [];
      for (let d = ds.startDay; d <= ds.lastDay(); d++) out.push(dayToString(d));
      return out;
    },
    threadHistory: historyOf,
    artifact: (id, artifactId) => {
      const found = ds.lookup(id);
      return found.status === 'ok' ? ds.artifact(found.thread, artifactId) : undefined;
    },
    threads: () => Array.from(ds.threads(), (ref) => ds.threadEntry(ref)),
    isDeleted: (id) => ds.isDeleted(id),
    isRestricted: (id) => {
      const found = ds.lookup(id);
      return found.status === 'ok' && found.thread.restricted;
    },
    poisonLines: (day) => {
      const p = engine?.spec.poison ?? 0;
      if (!engine || p <= 0) return [];
      const d = toDay(day);
      const out: string[] = [];
      const n = ds.countLines(d);
      for (let i = 0; i < n; i++) {
        const line = engine.poisonLineAt(d, i, p);
        if (line !== undefined) out.push(line);
      }
      return out;
    },
    poisonEntries: (id) => {
      const p = engine?.spec.poisonHistory ?? 0;
      if (!engine || p <= 0) return [];
      return (historyOf(id) ?? [])
        .filter((e) => e.role === 'user' && engine.poisonEntry(e.message_id, p) !== undefined)
        .map((e) => e.message_id);
    },
    poisonArtifacts: (id) => {
      const p = engine?.spec.poisonHistory ?? 0;
      if (!engine || p <= 0) return [];
      const ids = new Set((historyOf(id) ?? []).flatMap((e) => e.artifact_ids));
      return [...ids].filter((a) => engine.poisonArtifact(a, p) !== undefined);
    },
  };
}

/**
 * Starts the simulator: data set, fault engine, HTTP server, and the handle tests and the CLI use.
 * Long: the handle's methods are closures over the running server's state, built in one place.
 */
export async function startSimulator(opts: SimulatorOptions = {}): Promise<Simulator> {
  const seed = (opts.seed ?? DEFAULT_SEED) >>> 0;
  const now = opts.now ?? (() => new Date());
  const ds = new Dataset({
    seed,
    days: opts.days ?? DEFAULT_DAYS,
    recordsPerDay: opts.recordsPerDay ?? DEFAULT_RECORDS_PER_DAY,
    users: opts.users ?? DEFAULT_USERS,
    now,
  });
  const keys = deriveKeys(seed);
  const engine = new FaultEngine(
    seed,
    typeof opts.faults === 'string' ? parseFaultSpec(opts.faults) : (opts.faults ?? {}),
  );
  const runner = new TaskRunner(ds, opts.taskStepMs ?? 25);
  const revoked = new Set<string>();
  const addresses = { baseUrl: '', legacyBaseUrl: '', tokenUrl: '' };
  let doc: Record<string, unknown> | undefined;
  const openapi = () => {
    doc ??= buildOpenApiDocument(addresses);
    return doc;
  };
  const server = createServer(
    { keepAlive: true },
    createHandler({
      admin: opts.admin ?? false,
      ds,
      keys,
      engine,
      runner,
      openapi,
      accessTokenTtlSec: opts.accessTokenTtlSec ?? 3600,
      sleep: opts.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms))),
      revoked,
    }),
  );
  const host = opts.host ?? '127.0.0.1';
  server.listen(opts.port ?? 0, host);
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  const shownHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  addresses.baseUrl = `http://${shownHost}:${port}`;
  addresses.legacyBaseUrl = `${addresses.baseUrl}${LEGACY_PREFIX}`;
  addresses.tokenUrl = `${addresses.baseUrl}${TOKEN_PATH}`;

  const nowMs = now().getTime();
  let rotated = 0;
  const credentials: SimulatorCredentials = {
    serviceAccountToken: issueToken(keys, AUD_ANALYTICS, keys.serviceAccount, nowMs, 365 * 86_400),
    clientId: keys.clientId,
    clientSecret: keys.clientSecret,
    apiKey: keys.apiKey,
    accessToken: issueToken(keys, AUD_V2, keys.serviceAccount, nowMs, 30 * 86_400, 'static'),
  };

  return {
    ...addresses,
    port,
    seed,
    credentials,
    env: () => ({
      CRS_BASE_URL: addresses.baseUrl,
      CRS_LEGACY_BASE_URL: addresses.legacyBaseUrl,
      CRS_SERVICE_ACCOUNT_TOKEN: credentials.serviceAccountToken,
      CRS_TOKEN_URL: addresses.tokenUrl,
      CRS_CLIENT_ID: credentials.clientId,
      CRS_CLIENT_SECRET: credentials.clientSecret,
      CRS_API_KEY: credentials.apiKey,
    }),
    rotateCredential: (kind) => {
      const rotations = ++rotated;
      const at = now().getTime();
      if (kind === 'serviceAccountToken' || kind === 'accessToken') revoked.add(credentials[kind]);
      // A token id of its own: a token issued within the same second would otherwise be the same.
      credentials[kind] =
        kind === 'serviceAccountToken'
          ? issueToken(keys, AUD_ANALYTICS, keys.serviceAccount, at, 365 * 86_400, `rotated-${rotations}`)
          : kind === 'accessToken'
            ? issueToken(keys, AUD_V2, keys.serviceAccount, at, 30 * 86_400, `static-${rotations}`)
            : rotatedSecret(seed, kind, rotations);
      if (kind === 'clientSecret' || kind === 'apiKey') keys[kind] = credentials[kind];
      return credentials[kind];
    },
    truth: createTruth(ds, engine),
    dataset: ds,
    setFaults: (spec) => {
      engine.spec = typeof spec === 'string' ? parseFaultSpec(spec) : spec;
    },
    faults: () => engine.spec,
    faultCounts: () => Object.fromEntries(engine.counts),
    restartFaultBursts: () => engine.restartBursts(),
    openapi,
    close: async () => {
      runner.closeAll();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}

export interface GenerateOptions {
  seed?: number;
  /** The day to generate (YYYY-MM-DD); it must be among the data days (see `days`). */
  day: string;
  recordsPerDay: number;
  users?: number;
  /** Clock for arrival of late records; default: 3 days after `day` ends, so the day is complete. */
  now?: () => Date;
}

/** A day's export lines without HTTP (benchmarks, fixtures); constant memory. */
export function generateExportLines(opts: GenerateOptions): Generator<string> {
  return generatorDataset(opts).exportLines(toDay(opts.day));
}

function generatorDataset(opts: GenerateOptions): Dataset {
  const day = toDay(opts.day);
  const fixed = new Date((day + 4) * DAY_MS);
  const now = opts.now ?? (() => fixed);
  return new Dataset({
    seed: opts.seed ?? DEFAULT_SEED,
    days: 0,
    recordsPerDay: opts.recordsPerDay,
    users: opts.users ?? DEFAULT_USERS,
    now,
    startDay: Math.min(day - 7, dayOf(now().getTime())),
  });
}

/** Writes a day's export to a stream (a file, stdout), honouring backpressure; the fast byte path. */
export async function writeExportDay(
  opts: GenerateOptions,
  out: Writable,
): Promise<{ lines: number; bytes: number }> {
  const ds = generatorDataset(opts);
  const w = new ByteWriter(1024 * 1024);
  let lines = 0;
  let bytes = 0;
  for (const _ of ds.exportInto(toDay(opts.day), w)) {
    w.byte(10);
    lines++;
    if (w.off >= 768 * 1024) {
      const chunk = w.buf.subarray(0, w.off);
      bytes += chunk.length;
      w.buf = Buffer.allocUnsafe(1024 * 1024);
      w.off = 0;
      if (!out.write(chunk)) await once(out, 'drain');
    }
  }
  bytes += w.off;
  out.write(w.buf.subarray(0, w.off));
  return { lines, bytes };
}
