import type { ServerResponse } from 'node:http';
import { type Dataset, newCursor } from './dataset.ts';
import { type FaultEngine, type FaultSpec, malformLine, type RequestFaults } from './faults.ts';
import { ByteWriter } from './text.ts';

/**
 * Writes the export of a window of days as JSONL. Lines are assembled as bytes in a chunk
 * buffer that is handed to the socket whenever it passes FLUSH_BYTES, honouring backpressure:
 * memory stays flat however large the day. Line faults (malformed, duplicate, a cut mid-line)
 * are applied here, on the way out, so the ground truth stays the clean data set.
 */

/** Large writes of ready-encoded bytes: per-chunk costs (syscalls, chunk framing) dominate otherwise. */
const FLUSH_BYTES = 256 * 1024;
const NEWLINE = 10;

export interface ExportWindow {
  from: number;
  to: number;
}

export function exportFileName(now: Date): string {
  const ts = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}Z$/, 'Z');
  return `message_history_${ts}.jsonl`;
}

export async function streamExport(
  res: ServerResponse,
  ds: Dataset,
  window: ExportWindow,
  engine: FaultEngine,
  spec: FaultSpec,
  rf: RequestFaults,
): Promise<void> {
  // Where a cut falls: uniformly among the lines the window holds (counted first, cheaply).
  let cutAt = -1;
  if (rf.cut) {
    let total = 0;
    for (let day = window.from; day <= window.to; day++) total += ds.countLines(day);
    cutAt = Math.floor(rf.cutFraction * total);
    if (total === 0) {
      res.socket?.destroy();
      return;
    }
  }
  res.writeHead(200, {
    'content-type': 'application/x-ndjson; charset=utf-8',
    'content-disposition': `attachment; filename="${exportFileName(ds.now())}"`,
    'cache-control': 'no-store',
  });
  let closed = false;
  res.on('close', () => {
    closed = true;
  });
  const toDelete = new Set<string>();
  const pDelete = spec.deleteBeforeHistory ?? 0;
  const pMalformed = spec.malformed ?? 0;
  const pDuplicate = spec.duplicate ?? 0;
  const CHUNK = FLUSH_BYTES + 64 * 1024;
  // One writer for the whole response (the line generator holds it); each flush gives it a
  // fresh buffer, because the socket may still hold the one just written.
  const w = new ByteWriter(CHUNK);
  let k = 0;
  const cursor = newCursor();

  const flush = async (): Promise<void> => {
    if (w.off === 0 || closed) return;
    const chunk = w.buf.subarray(0, w.off);
    w.buf = Buffer.allocUnsafe(CHUNK);
    w.off = 0;
    const ok = res.write(chunk);
    if (!ok && !closed) {
      await new Promise<void>((resolve) => {
        const done = () => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.on('drain', done);
        res.on('close', done);
      });
    }
  };

  try {
    for (let day = window.from; day <= window.to && !closed; day++) {
      for (const start of ds.exportInto(day, w, cursor)) {
        if (pDelete > 0 && engine.deleteAfterExport(cursor.threadId, pDelete)) toDelete.add(cursor.threadId);
        if (k === cutAt) {
          // Half of the line's bytes, possibly inside a multi-byte character, as a real dropped
          // connection would leave it; then the socket goes without the chunked terminator.
          const half = start + Math.max(1, Math.floor((w.off - start) / 2));
          res.write(w.buf.subarray(0, half), () => res.socket?.destroy());
          return;
        }
        if (pMalformed > 0) {
          const h = engine.malformedAt(rf.contentKey, k, pMalformed);
          if (h !== undefined) {
            // The broken line goes before the good one: take the good one out and put it back after.
            const line = w.buf.toString('utf8', start, w.off);
            w.off = start;
            w.utf8(malformLine(line, h));
            w.byte(NEWLINE);
            w.utf8(line);
          }
        }
        w.byte(NEWLINE);
        if (pDuplicate > 0 && engine.duplicateAt(rf.contentKey, k, pDuplicate)) {
          const end = w.off;
          const lineStart = end - lineLength(w.buf, end);
          w.ensure(end - lineStart);
          w.off += w.buf.copy(w.buf, w.off, lineStart, end);
        }
        k++;
        if (w.off >= FLUSH_BYTES) {
          await flush();
          if (closed) break;
        }
      }
    }
    if (!closed) {
      await flush();
      res.end();
    }
  } finally {
    for (const id of toDelete) ds.deleteById(id);
  }
}

/** Length of the last line (with its newline) ending at `end`. */
function lineLength(buf: Buffer, end: number): number {
  const prev = buf.lastIndexOf(NEWLINE, end - 2);
  return end - (prev + 1);
}
