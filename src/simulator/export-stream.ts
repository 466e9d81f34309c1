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

/**
 * Streams the export of a window with the request's faults (cut, clean truncation, stall, poison
 * lines, slow or chunked writes). Long: the faults act at line positions of one write loop, and
 * splitting the loop would scatter the positions they share across functions.
 */
export async function streamExport(
  res: ServerResponse,
  ds: Dataset,
  window: ExportWindow,
  engine: FaultEngine,
  spec: FaultSpec,
  rf: RequestFaults,
): Promise<void> {
  // Where a cut, a clean truncation or a stall falls: uniformly among the lines the window holds
  // (counted first, cheaply).
  let cutAt = -1;
  let endAt = -1;
  let stallAt = -1;
  if (rf.cut || rf.truncate || rf.stall) {
    let total = 0;
    for (let day = window.from; day <= window.to; day++) total += ds.countLines(day);
    if (rf.cut) {
      cutAt = Math.floor(rf.cutFraction * total);
      if (total === 0) {
        engine.count('cut');
        res.socket?.destroy();
        return;
      }
    } else if (rf.truncate) {
      // At most 80% of the lines: a smaller loss at a clean line boundary is, for any client, the
      // same as that many records deleted upstream (which a deletion guard bounds, not detects).
      endAt = Math.max(1, Math.floor(0.8 * rf.truncateFraction * total));
    } else {
      stallAt = Math.floor(rf.truncateFraction * total);
    }
  }
  if (rf.truncate === 'html' || rf.truncate === 'json-error' || rf.truncate === 'empty') {
    // A proxy or the service itself answering 200 with something that is not the export.
    engine.count('truncate');
    const body =
      rf.truncate === 'html'
        ? '<!DOCTYPE html><html><head><title>Maintenance</title></head><body><h1>We will be back soon</h1></body></html>\n'
        : rf.truncate === 'json-error'
          ? '{"detail":"export temporarily unavailable"}\n'
          : '';
    res.writeHead(200, {
      'content-type':
        rf.truncate === 'html'
          ? 'text/html; charset=utf-8'
          : rf.truncate === 'json-error'
            ? 'application/json'
            : 'application/x-ndjson; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'cache-control': 'no-store',
    });
    res.end(body);
    return;
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
  const pPoison = spec.poison ?? 0;
  const pRespell = spec.respell ?? 0;
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
      let lineOfDay = 0;
      for (const start of ds.exportInto(day, w, cursor)) {
        if (pDelete > 0 && engine.deleteAfterExport(cursor.threadId, pDelete)) toDelete.add(cursor.threadId);
        if (pRespell > 0) {
          const spelled = engine.respelled(w.buf.toString('utf8', start, w.off), pRespell);
          if (spelled !== undefined) {
            engine.count('respell');
            w.off = start;
            w.utf8(spelled);
          }
        }
        if (k === cutAt) {
          // Half of the line's bytes, possibly inside a multi-byte character, as a real dropped
          // connection would leave it; then the socket goes without the chunked terminator.
          const half = start + Math.max(1, Math.floor((w.off - start) / 2));
          engine.count('cut');
          res.write(w.buf.subarray(0, half), () => res.socket?.destroy());
          return;
        }
        const poison = engine.poisonLineAt(day, lineOfDay++, pPoison);
        if (poison !== undefined) {
          engine.count('poison-line');
          const line = w.buf.toString('utf8', start, w.off);
          w.off = start;
          w.utf8(poison);
          w.byte(NEWLINE);
          w.utf8(line);
        }
        if (pMalformed > 0) {
          const h = engine.malformedAt(rf.contentKey, k, pMalformed);
          if (h !== undefined) {
            engine.count('malformed');
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
          engine.count('duplicate');
          const end = w.off;
          const lineStart = end - lineLength(w.buf, end);
          w.ensure(end - lineStart);
          w.off += w.buf.copy(w.buf, w.off, lineStart, end);
        }
        k++;
        if (k === endAt) {
          // Ends cleanly after a whole line, as if the service had stopped writing the day early;
          // one variant leaves off the last newline.
          engine.count('truncate');
          if (rf.truncate === 'no-final-newline') w.off--;
          await flush();
          if (!closed) res.end();
          return;
        }
        if (k === stallAt) {
          // The body stops (the connection stays open) for longer than a client should wait,
          // then the connection drops without the chunked terminator.
          engine.count('stall');
          await flush();
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, rf.stallMs);
            res.once('close', () => {
              clearTimeout(timer);
              resolve();
            });
          });
          res.socket?.destroy();
          return;
        }
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
