/**
 * Checked access where the code knows a value is there but the type system cannot (an index in
 * range, a key just put in a map). Instead of a non-null assertion, which would let an
 * `undefined` through silently if the reasoning were ever wrong, these throw at the spot.
 */

/** `xs[i]` for an index known to be in range. */
export function itemAt<T>(xs: ArrayLike<T>, i: number): T {
  const v = xs[i];
  if (v === undefined) throw new RangeError(`index ${i} is out of range (length ${xs.length})`);
  return v;
}

/** A value known to be present (a map entry just checked or stored, a match group that must exist). */
export function present<T>(v: T | undefined | null, what: string): T {
  if (v === undefined || v === null) throw new Error(`${what} is missing`);
  return v;
}

/**
 * `xs[i]` of a Float64Array, for an index known to be in range. A function of its own rather than
 * `itemAt`: hot loops over typed arrays stay monomorphic (the simulator renders millions of
 * lines through these).
 */
export function f64At(xs: Float64Array, i: number): number {
  const v = xs[i];
  if (v === undefined) throw new RangeError(`index ${i} is out of range (length ${xs.length})`);
  return v;
}

/** `xs[i]` of a Uint8Array, for an index known to be in range (see f64At). */
export function u8At(xs: Uint8Array, i: number): number {
  const v = xs[i];
  if (v === undefined) throw new RangeError(`index ${i} is out of range (length ${xs.length})`);
  return v;
}
