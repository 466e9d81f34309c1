import { createSecretKey, type KeyObject } from 'node:crypto';
import { type Queryable, rowsOf } from '../read/queryable.ts';
import { canonicalId, type ErasedKind, keyedId, privacyKey } from './keyed-id.ts';

/**
 * What a load or an enrichment must drop: the users and threads `crs-sync forget` erased.
 *
 * Read inside the writer's transaction, after `lock table privacy_suppressions in share mode`
 * (held to its commit): `forget` adds to the list under a lock that conflicts with it, so a
 * writer's transaction either commits before the erasure starts (and the erasure removes what
 * it wrote) or reads the list with the new entries (and drops their rows).
 *
 * The list only grows, one erasure at a time: its version is the last erasure's id, and a writer
 * keeps the list it read until the version moves (one short statement per transaction).
 */
export class Suppression {
  static readonly NONE = new Suppression(0, undefined, { user: new Set(), thread: new Set() });

  readonly version: number;
  // A KeyObject made once: an HMAC under a Buffer key makes one per call (~10 µs against ~2 µs).
  readonly #key: KeyObject | undefined;
  // One set a kind: a list of erased users only (no thread named) then costs a load no hash of
  // a thread id, which is new on most lines (a user's id repeats and is remembered below).
  readonly #hashes: Readonly<Record<ErasedKind, ReadonlySet<string>>>;
  // Ids repeat across a day's lines (a user's every message, a thread's): each is hashed once,
  // remembered by the id as given, one map a kind (no key text built per row).
  readonly #seen: Record<ErasedKind, Map<string, boolean>> = { user: new Map(), thread: new Map() };

  private constructor(
    version: number,
    key: Buffer | undefined,
    hashes: Readonly<Record<ErasedKind, ReadonlySet<string>>>,
  ) {
    this.version = version;
    this.#key = key === undefined ? undefined : createSecretKey(key);
    this.#hashes = hashes;
  }

  /** Nothing is suppressed: the writers' checks cost nothing. */
  get empty(): boolean {
    return this.size === 0;
  }

  get size(): number {
    return this.#hashes.user.size + this.#hashes.thread.size;
  }

  /** Whether `id` (any case; not a UUID: never) was erased as `kind`. */
  has(kind: ErasedKind, id: string | null | undefined): boolean {
    const hashes = this.#hashes[kind];
    if (hashes.size === 0 || this.#key === undefined || id == null) return false;
    const seen = this.#seen[kind];
    const known = seen.get(id);
    if (known !== undefined) return known;
    const canonical = canonicalId(id);
    const hit = canonical !== undefined && hashes.has(keyedId(this.#key, kind, canonical).toString('hex'));
    if (seen.size >= 100_000) seen.clear();
    seen.set(id, hit);
    return hit;
  }

  /** Whether a row of this user in this thread was erased (either one). */
  drops(userId: string | null | undefined, threadId: string | null | undefined): boolean {
    return this.has('user', userId) || this.has('thread', threadId);
  }

  /**
   * Takes the writer's lock and reads the list, reusing `known` while no erasure has been added
   * since. Must run inside the writer's transaction, unless `lock` is false: a reader that only
   * decides what to send to a writer, which reads the list again under the lock.
   */
  static async read(
    c: Queryable,
    known: Suppression = Suppression.NONE,
    opts: { lock?: boolean } = {},
  ): Promise<Suppression> {
    if (opts.lock !== false) await c.query('lock table privacy_suppressions in share mode');
    const v = await rowsOf<{ version: string }>(
      c,
      'select coalesce(max(id), 0)::text as version from privacy_erasures',
    );
    const version = Number(v[0]?.version ?? 0);
    if (version === known.version) return known;
    const key = await privacyKey(c, false);
    const rows = await rowsOf<{ kind: ErasedKind; key_hash: Buffer }>(
      c,
      'select kind, key_hash from privacy_suppressions',
    );
    const hashes = { user: new Set<string>(), thread: new Set<string>() };
    for (const r of rows) hashes[r.kind].add(r.key_hash.toString('hex'));
    return new Suppression(version, key, hashes);
  }
}
