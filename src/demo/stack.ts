/**
 * What the demo has started, stopped in reverse order. Each stop is bounded in time and its
 * failure is reported, never thrown, so one stuck part cannot keep the others running.
 */
export class Stack {
  private readonly parts: { name: string; stop: () => Promise<void> }[] = [];
  private stopping: Promise<void> | undefined;
  private readonly report: (line: string) => void;

  constructor(report: (line: string) => void) {
    this.report = report;
  }

  /** Registers how to stop something just started. */
  add(name: string, stop: () => Promise<void>): void {
    this.parts.push({ name, stop });
  }

  /** Stops everything once; later calls wait for the same stop. */
  stop(timeoutMs = 20_000): Promise<void> {
    this.stopping ??= (async () => {
      for (let p = this.parts.pop(); p !== undefined; p = this.parts.pop()) {
        let timer: NodeJS.Timeout | undefined;
        try {
          await Promise.race([
            p.stop(),
            new Promise<void>((_, reject) => {
              timer = setTimeout(() => reject(new Error(`did not stop within ${timeoutMs} ms`)), timeoutMs);
            }),
          ]);
        } catch (err) {
          this.report(`could not stop ${p.name}: ${(err as Error).message}`);
        } finally {
          clearTimeout(timer);
        }
      }
    })();
    return this.stopping;
  }
}
