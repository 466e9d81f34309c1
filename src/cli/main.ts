/**
 * The CLI's entry point. V8 sizes its young generation from the machine's memory: on this kind of
 * machine (24 GiB) it grows to 2 × 64 MB semi-spaces, more than everything else the loader holds.
 * The loader's objects die young or live for one batch, so a 16 MB semi-space costs little GC
 * time and keeps the process within its memory budget (bench/README.md: peak RSS). V8 takes heap
 * sizes only at start-up, so the process re-executes itself in place (same PID) with the flag,
 * unless it was given one (command line or NODE_OPTIONS) or runs where execve does not exist.
 */
const SEMI_SPACE_FLAG = '--max-semi-space-size';
const SEMI_SPACE_MB = 16;

const given =
  process.execArgv.some((a) => a.startsWith(SEMI_SPACE_FLAG)) ||
  (process.env.NODE_OPTIONS ?? '').includes(SEMI_SPACE_FLAG);
if (!given && typeof process.execve === 'function') {
  process.execve(process.execPath, [
    process.execPath,
    `${SEMI_SPACE_FLAG}=${SEMI_SPACE_MB}`,
    ...process.execArgv,
    ...process.argv.slice(1),
  ]);
}

await import('./program.ts');
