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

interface ExportBodyOptions {
  operation: string;
  idleTimeoutMs: number;
  scrubber: SecretScrubber;
  signal?: AbortSignal | undefined;
}

/**
 * The export's body as a stream of chunks with its completeness tracked (ExportBody): its iterator,
 * its Node stream and its cancel share the body's state (bytes read, last byte, finished).
 */
export function exportBody(open: OpenStream, opts: ExportBodyOptions): ExportBody {
  return new StreamedExport(open, opts);
}

class StreamedExport implements ExportBody {
  readonly status: number;
  readonly fileName: string | undefined;
  readonly contentType: string | undefined;
  readonly contentLength: number | undefined;
  readonly attempts: number;
  readonly #open: OpenStream;
  readonly #opts: ExportBodyOptions;
  readonly #source: AsyncIterator<Buffer>;
  #bytesRead = 0;
  #complete = false;
  #lastByte = -1;
  #started = false;
  #finished = false;

  constructor(open: OpenStream, opts: ExportBodyOptions) {
    this.#open = open;
    this.#opts = opts;
    const lengthHeader = open.header('content-length');
    this.contentLength =
      lengthHeader !== undefined && /^\d+$/.test(lengthHeader) ? Number(lengthHeader) : undefined;
    this.#source = open.body[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
    this.status = open.status;
    this.fileName = fileNameFromContentDisposition(open.header('content-disposition'));
    this.contentType = open.header('content-type');
    this.attempts = open.attempts;
  }

  get bytesRead(): number {
    return this.#bytesRead;
  }

  get complete(): boolean {
    return this.#complete;
  }

  get incompleteReason(): string | null {
    return incompleteReason({
      complete: this.#complete,
      status: this.#open.status,
      contentType: this.#open.header('content-type'),
      contentLength: this.contentLength,
      bytesRead: this.#bytesRead,
      lastByte: this.#lastByte,
    });
  }

  [Symbol.asyncIterator](): AsyncGenerator<Uint8Array> {
    return this.#iterate();
  }

  toNodeStream(): Readable {
    return Readable.from(this.#iterate(), { objectMode: false });
  }

  cancel(): Promise<void> {
    return this.#finish(true);
  }

  async *#iterate(): AsyncGenerator<Uint8Array> {
    if (this.#started) throw new Error('an export body can be iterated only once');
    this.#started = true;
    try {
      for (;;) {
        const chunk = await this.#next();
        if (chunk.done) break;
        this.#bytesRead += chunk.value.byteLength;
        if (chunk.value.byteLength > 0) this.#lastByte = u8At(chunk.value, chunk.value.byteLength - 1);
        yield chunk.value;
      }
      if (this.contentLength !== undefined && this.#bytesRead < this.contentLength) {
        throw this.#cut(`${this.contentLength} bytes announced`);
      }
      this.#complete = true;
    } finally {
      // Reached on normal end, on error, and when the consumer stops early (break/return).
      await this.#finish(!this.#complete);
    }
  }

  /** The next chunk within the idle timeout; a stall or a cut connection is STREAM_CUT. */
  async #next(): Promise<IteratorResult<Buffer>> {
    const { idleTimeoutMs } = this.#opts;
    const idle = setTimeout(() => this.#open.abort(new IdleTimeout()), idleTimeoutMs);
    try {
      return await this.#source.next();
    } catch (err) {
      if (this.#open.callerAborted()) throw cancelled(this.#opts.signal);
      if (err instanceof IdleTimeout || (err as { cause?: unknown })?.cause instanceof IdleTimeout) {
        throw this.#cut(`no data for ${idleTimeoutMs} ms`);
      }
      throw this.#cut(this.#opts.scrubber.scrub(networkReason(err)));
    } finally {
      clearTimeout(idle);
    }
  }

  async #finish(cancelBody: boolean): Promise<void> {
    if (this.#finished) return;
    this.#finished = true;
    // Destroying the body closes its connection: an unread rest must not go back to the pool.
    // undici then emits 'error' (RequestAbortedError) on a body that was not read to its end; a
    // body refused unread has no reader listening, and an 'error' event with no listener would
    // end the process.
    if (cancelBody) {
      this.#open.body.on('error', () => {});
      this.#open.body.destroy();
    }
    this.#open.release();
  }

  #cut(why: string, cause?: unknown): CrsError {
    const { operation } = this.#opts;
    return new CrsError(
      'STREAM_CUT',
      `${operation}: the export stream was cut after ${this.#bytesRead} bytes (${why})`,
      {
        retryable: true,
        cause,
        details: { operation, bytesRead: this.#bytesRead, contentLength: this.contentLength },
      },
    );
  }
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
