import { createHash, randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { open } from 'node:fs/promises';
import path from 'node:path';
import { type DayRange, fileLoad } from '../../common/load-target.ts';
import type { Config } from '../../config.ts';
import { CrsError, errorMessage } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import type { Warehouse } from '../../warehouse/db.ts';
import { closeRun, runStatus, startRun } from '../../warehouse/ledger.ts';
import { type LoadProgress, type LoadSummary, loaderSettings, runLoad } from '../merge/load.ts';

/**
 * `crs-sync import`: a JSONL export file (or stdin) through the same parser and loader as the
 * export, with no Temporal and no HTTP.
 *
 * Resuming: a file's default load id is derived from its path, size and modification time, so
 * running the same import again after an interruption resumes it from its checkpoint. When that
 * load already succeeded, the new run gets a fresh id (and changes nothing, as the rows match).
 */
export interface ImportOptions {
  file: string; // a path, or '-' for stdin
  /** The run's id (`--load-id`): for a file, its run id is its load id. */
  loadId?: string;
  /** The days of which the file holds every record (`--complete-days`): rows of them it lacks are deleted. */
  wholeDays?: DayRange | null;
  onProgress?: (p: LoadProgress) => void;
  onStart?: (info: { loadId: string; totalBytes: number | null; resuming: boolean }) => void;
  signal?: AbortSignal;
}

export async function importFile(
  w: Warehouse,
  config: Config,
  log: Logger,
  opts: ImportOptions,
): Promise<LoadSummary> {
  const fromStdin = opts.file === '-';
  const { loadId, sourceName, totalBytes } = await identifyInput(w, opts);
  const resuming = (await runStatus(w.db, loadId)) !== undefined;
  opts.onStart?.({ loadId, totalBytes, resuming });
  await startRun(w.db, {
    runId: loadId,
    kind: 'import',
    source: sourceName,
    windowStart: opts.wholeDays?.from ?? null,
    windowEnd: opts.wholeDays?.to ?? null,
  });

  let opened = false;
  const tail = { last: -1 };
  try {
    const summary = await runLoad({
      warehouse: w,
      log,
      target: fileLoad(loadId, sourceName, opts.wholeDays ?? null),
      open: async () => {
        if (fromStdin) {
          // stdin cannot be read twice: a failure part way is final for this run (the checkpoint
          // still lets `--load-id` resume it from a second copy of the input).
          if (opened) throw new CrsError('INPUT_UNREADABLE', 'stdin cannot be re-read');
          opened = true;
          return lastByteOf(process.stdin, tail);
        }
        return lastByteOf(readChunks(sourceName), tail);
      },
      // A file cut at a line boundary looks like a whole one with fewer records: without its final
      // newline, the declared days lose nothing.
      incompleteReason: () =>
        tail.last === 10
          ? null
          : tail.last < 0
            ? 'empty input'
            : 'the input does not end with a newline (it may be cut)',
      ...loaderSettings(config),
      maxReopens: fromStdin ? 0 : 2,
      ...(opts.signal ? { signal: opts.signal } : {}),
      ...(opts.onProgress ? { onProgress: opts.onProgress } : {}),
    });
    await closeRun(w.db, loadId, 'succeeded', summary);
    return summary;
  } catch (err) {
    const cancelled = opts.signal?.aborted === true;
    await closeRun(w.db, loadId, cancelled ? 'cancelled' : 'failed', undefined, errorMessage(err)).catch(
      () => {},
    );
    throw err;
  }
}

/**
 * What the import reads (the file's absolute path, or stdin), its size when known, and its load
 * id: the one given, else one derived from the file (a fresh one when that load already
 * succeeded), else a fresh one for stdin.
 */
async function identifyInput(
  w: Warehouse,
  opts: ImportOptions,
): Promise<{ loadId: string; sourceName: string; totalBytes: number | null }> {
  const fresh = () =>
    `import-${new Date()
      .toISOString()
      .replace(/[-:.TZ]/g, '')
      .slice(0, 14)}-${randomBytes(3).toString('hex')}`;
  if (opts.file === '-') return { loadId: opts.loadId ?? fresh(), sourceName: 'stdin', totalBytes: null };
  const abs = path.resolve(opts.file);
  let st: ReturnType<typeof statSync>;
  try {
    st = statSync(abs);
  } catch (err) {
    throw new CrsError('INPUT_UNREADABLE', `cannot read ${opts.file}: ${errorMessage(err)}`);
  }
  if (!st.isFile()) throw new CrsError('INPUT_UNREADABLE', `${opts.file} is not a file`);
  let loadId = opts.loadId;
  if (!loadId) {
    const fp = createHash('sha1').update(`${abs}\0${st.size}\0${st.mtimeMs}`).digest('hex').slice(0, 12);
    loadId = `import-${fp}`;
    if ((await runStatus(w.db, loadId)) === 'succeeded') loadId = `${loadId}-${Date.now().toString(36)}`;
  }
  return { loadId, sourceName: abs, totalBytes: st.size };
}

const CHUNK_BYTES = 1 << 20;

async function* lastByteOf(
  source: AsyncIterable<Uint8Array>,
  tail: { last: number },
): AsyncGenerator<Uint8Array> {
  tail.last = -1;
  for await (const chunk of source) {
    const last = chunk.at(-1);
    if (last !== undefined) tail.last = last;
    yield chunk;
  }
}

/**
 * The file in 1 MiB chunks, all read into one buffer. Safe because the splitter never keeps a
 * chunk (it copies a partial line out, and its line views die before it asks for the next chunk);
 * a fresh buffer per chunk was ~1.6 GB of short-lived external memory per 1M lines, which V8
 * frees only at its next full GC.
 */
async function* readChunks(file: string): AsyncGenerator<Uint8Array> {
  const fh = await open(file, 'r');
  try {
    const buf = Buffer.allocUnsafeSlow(CHUNK_BYTES);
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, CHUNK_BYTES, null);
      if (bytesRead === 0) return;
      yield buf.subarray(0, bytesRead);
    }
  } finally {
    await fh.close();
  }
}
