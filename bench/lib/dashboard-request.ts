/** One dashboard request as the dashboard benches time it: status, milliseconds, sections that failed. */
export interface DashboardTiming {
  status: number;
  ms: number;
  /** Sections that answered with an error (a query stopped by the timeout among them). */
  failed: number;
}

/** Fetches `target` (a page or its /api/ JSON) from the dashboard at `base`, the body read whole. */
export async function timeDashboardRequest(base: string, target: string): Promise<DashboardTiming> {
  const t0 = performance.now();
  const res = await fetch(`${base}${target}`);
  const body = await res.text();
  const ms = performance.now() - t0;
  const failed = target.startsWith('/api/')
    ? Object.values(
        (JSON.parse(body) as { sections?: Record<string, { ok: boolean }> }).sections ?? {},
      ).filter((s) => !s.ok).length
    : (body.match(/data-error="/g) ?? []).length;
  return { status: res.status, ms, failed };
}
