import type { ServerResponse } from 'node:http';
import type { Dataset, ExportCursor } from './dataset.ts';
import { type FaultEngine, type FaultSpec, malformLine, type RequestFaults } from './faults.ts';

/**
 * Writes the export of a window of days as JSONL, line by line from the generator, honouring
 * backpressure: memory stays flat however large the day. Line faults (malformed, duplicate, a cut
 * mid-line) are applied here, on the way out, so the ground truth stays the clean data set.
 */

/** Large writes of ready-encoded bytes: per-chunk costs (syscalls, chunk framing) dominate otherwise. */
const FLUSH_BYTES = 256 * 1024;

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
  const days = Math.max(0, window.to - window.from + 1);
  // Where a cut falls: a fraction of the lines the window is expected to hold; if the stream is
  // shorter, the last line is cut instead, so a cut is never silently skipped.
  const cutAt = rf.cut ? Math.floor(rf.cutFraction * Math.max(1, ds.recordsPerDay * days * 0.8)) : -1;
  let buf = '';
  let k = 0;
  let pending: string | undefined;
  let cutDone = false;
  const cursor: ExportCursor = { threadId: '' };

  const flush = async (): Promise<void> => {
    if (buf.length === 0 || closed) return;
    const ok = res.write(Buffer.from(buf, 'utf8'));
    buf = '';
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

  const cut = (line: string): void => {
    // Half of the line's bytes: like a real dropped connection, the cut may fall inside a
    // multi-byte character.
    const bytes = Buffer.from(line, 'utf8');
    const partial = bytes.subarray(0, Math.max(1, Math.floor(bytes.length / 2)));
    cutDone = true;
    // Destroying the socket once the half line is out ends the chunked body without its
    // terminator: the client sees a premature close.
    res.write(Buffer.concat([Buffer.from(buf, 'utf8'), partial]), () => res.socket?.destroy());
    buf = '';
  };

  /** Emits one line (held back by one so that a cut can fall on the last line). */
  const emit = (line: string): void => {
    if (pMalformed > 0) {
      const h = engine.malformedAt(rf.contentKey, k, pMalformed);
      if (h !== undefined) buf += `${malformLine(line, h)}\n`;
    }
    buf += `${line}\n`;
    if (pDuplicate > 0 && engine.duplicateAt(rf.contentKey, k, pDuplicate)) buf += `${line}\n`;
    k++;
  };

  try {
    for (let day = window.from; day <= window.to && !closed && !cutDone; day++) {
      for (const line of ds.exportLines(day, cursor)) {
        if (pDelete > 0 && engine.deleteAfterExport(cursor.threadId, pDelete)) toDelete.add(cursor.threadId);
        if (pending !== undefined) emit(pending);
        pending = line;
        if (cutAt >= 0 && k === cutAt) {
          cut(pending);
          break;
        }
        if (buf.length >= FLUSH_BYTES) {
          await flush();
          if (closed) break;
        }
      }
    }
    if (!closed && !cutDone) {
      if (cutAt >= 0) {
        if (pending !== undefined) cut(pending);
        else res.socket?.destroy();
        return;
      }
      if (pending !== undefined) emit(pending);
      await flush();
      res.end();
    }
  } finally {
    for (const id of toDelete) ds.deleteById(id);
  }
}
