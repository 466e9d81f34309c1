import { Readable } from 'node:stream';
import { u8At } from '../common/checked.ts';
import { CrsError } from '../errors.ts';
import { fileNameFromContentDisposition } from './content-disposition.ts';
import { cancelled } from './rate-limiter.ts';
import type { SecretScrubber } from './secrets.ts';
import { networkReason, type OpenStream } from './transport.ts';

/**
 * The body of one analytics export (spec §4.12), as it arrives. Iterate it once (for await, or
 * `toNodeStream()`). Retries happened before the body started; once it flows, a cut connection
 * or a stall longer than the idle timeout ends the iteration with CrsError 'STREAM_CUT'
 * (retryable) — the caller restarts the request and skips what it already committed.
 */
export interface ExportBody extends AsyncIterable<Uint8Array> {
  readonly status: number;
  /** From Content-Disposition, e.g. message_history_20260101T000000Z.jsonl. */
  readonly fileName: string | undefined;
  readonly contentType: string | undefined;
  /** Content-Length when the server sent one (then a short body is a STREAM_CUT too). */
  readonly contentLength: number | undefined;
  /** Bytes handed to the consumer so far. */
  readonly bytesRead: number;
  /** HTTP attempts it took to get the body started. */
  readonly attempts: number;
  /** True once the body ended normally. */
  readonly complete: boolean;
  /**
   * Why the body, once read, is not known to be the whole export; null when it is: it ended
   * normally, with status 200, a JSONL-family or text/plain content type, no byte more or less
   * than a Content-Length, and a newline as its last byte (a cut at a line boundary leaves none).
   * Only a known complete export may tell which of a day's rows the service no longer holds.
   */
  readonly incompleteReason: string | null;
  toNodeStream(): Readable;
  /** Stops the download and frees its connection; safe to call at any time. */
  cancel(): Promise<void>;
}

class IdleTimeout extends Error {
  constructor() {
    super('no data within the idle timeout');
    this.name = 'IdleTimeout';
  }
}

/**
 * The export's body as a stream of chunks with its completeness tracked (ExportBody).
 *
 * Long: one closure over the body's state (bytes read, last byte, finished) that its iterator, its
 * Node stream and its cancel share; split, that state would be passed around by reference.
 */
export function exportBody(
  open: OpenStream,
  opts: {
    operation: string;
    idleTimeoutMs: number;
    scrubber: SecretScrubber;
    signal?: AbortSignal | undefined;
  },
): ExportBody {
  const lengthHeader = open.header('content-length');
  const contentLength =
    lengthHeader !== undefined && /^\d+$/.test(lengthHeader) ? Number(lengthHeader) : undefined;
  let bytesRead = 0;
  let complete = false;
  let lastByte = -1;
  let started = false;
  let finished = false;
  const source = open.body[Symbol.asyncIterator]() as AsyncIterator<Buffer>;

  const finish = async (cancelBody: boolean) => {
    if (finished) return;
    finished = true;
    // Destroying the body closes its connection: an unread rest must not go back to the pool.
    // undici then emits 'error' (RequestAbortedError) on a body that was not read to its end; a
    // body refused unread has no reader listening, and an 'error' event with no listener would
    // end the process.
    if (cancelBody) {
      open.body.on('error', () => {});
      open.body.destroy();
    }
    open.release();
  };

  const cut = (why: string, cause?: unknown) =>
    new CrsError(
      'STREAM_CUT',
      `${opts.operation}: the export stream was cut after ${bytesRead} bytes (${why})`,
      {
        retryable: true,
        cause,
        details: { operation: opts.operation, bytesRead, contentLength },
      },
    );

  async function* iterate(): AsyncGenerator<Uint8Array> {
    if (started) throw new Error('an export body can be iterated only once');
    started = true;
    try {
      for (;;) {
        let idle: NodeJS.Timeout | undefined;
        let chunk: IteratorResult<Buffer>;
        try {
          idle = setTimeout(() => open.abort(new IdleTimeout()), opts.idleTimeoutMs);
          chunk = await source.next();
        } catch (err) {
          if (open.callerAborted()) throw cancelled(opts.signal);
          if (err instanceof IdleTimeout || (err as { cause?: unknown })?.cause instanceof IdleTimeout) {
            throw cut(`no data for ${opts.idleTimeoutMs} ms`);
          }
          throw cut(opts.scrubber.scrub(networkReason(err)));
        } finally {
          clearTimeout(idle);
        }
        if (chunk.done) break;
        bytesRead += chunk.value.byteLength;
        if (chunk.value.byteLength > 0) lastByte = u8At(chunk.value, chunk.value.byteLength - 1);
        yield chunk.value;
      }
      if (contentLength !== undefined && bytesRead < contentLength) {
        throw cut(`${contentLength} bytes announced`);
      }
      complete = true;
    } finally {
      // Reached on normal end, on error, and when the consumer stops early (break/return).
      await finish(!complete);
    }
  }

  const body: ExportBody = {
    status: open.status,
    fileName: fileNameFromContentDisposition(open.header('content-disposition')),
    contentType: open.header('content-type'),
    contentLength,
    get bytesRead() {
      return bytesRead;
    },
    attempts: open.attempts,
    get complete() {
      return complete;
    },
    get incompleteReason() {
      return incompleteReason({
        complete,
        status: open.status,
        contentType: open.header('content-type'),
        contentLength,
        bytesRead,
        lastByte,
      });
    },
    [Symbol.asyncIterator]: () => iterate(),
    toNodeStream: () => Readable.from(iterate(), { objectMode: false }),
    cancel: () => finish(true),
  };
  return body;
}

// The JSONL / NDJSON family under its registered and customary names, and text/plain.
const EXPORT_TYPES =
  /^(?:application\/(?:x-)?(?:ndjson|jsonl|json-?lines)|text\/(?:plain|(?:x-)?(?:ndjson|jsonl)))$/;

/**
 * Whether a content type says the body is a document other than an export: an HTML page or a JSON
 * error document that a proxy, gateway or maintenance mode answered with status 200. Such a body
 * is not read at all (its lines would only fill the quarantine); no content type at all is read,
 * but is not known complete.
 */
export function notAnExport(contentType: string | undefined): string | null {
  const type = contentType?.split(';')[0]?.trim().toLowerCase();
  if (!type || EXPORT_TYPES.test(type)) return null;
  return type.slice(0, 100);
}

/** See ExportBody.incompleteReason. Exported for the unit tests. */
export function incompleteReason(f: {
  complete: boolean;
  status: number;
  contentType: string | undefined;
  contentLength: number | undefined;
  bytesRead: number;
  lastByte: number;
}): string | null {
  if (!f.complete) return 'the body did not end normally';
  if (f.status !== 200) return `status ${f.status}, not 200`;
  const type = f.contentType?.split(';')[0]?.trim().toLowerCase();
  if (!type) return 'no content type (an export is JSONL)';
  // An HTML or JSON error document sent with status 200 (a proxy's or gateway's page) is not an export.
  if (!EXPORT_TYPES.test(type)) return `content type ${JSON.stringify(type.slice(0, 100))} is not JSONL`;
  if (f.contentLength !== undefined && f.bytesRead !== f.contentLength)
    return `${f.bytesRead} bytes received, ${f.contentLength} announced`;
  if (f.bytesRead === 0) return 'empty body';
  if (f.lastByte !== 10) return 'the last line has no final newline (the body may have been cut after it)';
  return null;
}
