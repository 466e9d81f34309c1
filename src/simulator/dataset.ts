import { f64At, itemAt, present, u8At } from '../common/checked.ts';
import type { ArtifactRef, CitedFile, HistoryEntry, ReplyDetails } from './content.ts';
import { assistantEntry, CANCELLED_TEXT, replyDetails } from './content.ts';
import {
  AVG_TURNS,
  DAY_MS,
  dayOf,
  EDGE_THREADS,
  formatWithOffset,
  isRestrictedUser,
  MAX_SPAN_DAYS,
  newPlan,
  planThread,
  type ThreadPlan,
} from './plan.ts';
import { decodeThreadId, encodeThreadId, hash4, Rng, stringHash, uuidFromHash } from './prng.ts';
import {
  type ByteWriter,
  buildTextPool,
  makeInput,
  makeThreadName,
  planResponse,
  renderResponse,
  renderResponseEscaped,
  type TextPool,
  writeInput,
  writeResponse,
} from './text.ts';

export interface DatasetOptions {
  seed: number;
  /** Days of history before today (UTC) that hold procedural data. */
  days: number;
  /** Approximate records per full day (threads per day = recordsPerDay / 3.5). */
  recordsPerDay: number;
  users: number;
  now: () => Date;
  /** First day (days since epoch) with data; default: today minus `days`. */
  startDay?: number;
}

export interface LiveReply {
  messageId: string;
  content: string;
  time: number;
  cancelled: boolean;
  details: ReplyDetails;
}

export interface LiveTurn {
  userMessageId: string;
  input: string;
  userTime: number;
  reply?: LiveReply;
}

export interface UploadedFile {
  file_id: string;
  file_name: string;
  size_bytes: number;
  content_type: string;
}

/** State changed through the API: a thread created by a client, or the overlay of a procedural one. */
export interface LiveThread {
  id: string;
  procKey: number | undefined;
  name: string | undefined;
  renamedAt: number | undefined;
  userId: string;
  createdAt: number;
  /** Procedural turns after this instant never happen: the conversation continued live instead. */
  frozenAt: number | undefined;
  turns: LiveTurn[];
  files: Map<string, UploadedFile>;
  deletedAt: number | undefined;
  /** The thread's past as changed upstream (`Dataset.editHistory`); none: as generated. */
  historyEdit?: HistoryEdit;
}

/** Entries removed from a history, and entries served under a new message_id. */
export interface HistoryEdit {
  removed: Set<string>;
  renamed: Map<string, string>;
}

export interface ThreadEntry {
  thread_id: string;
  thread_name: string;
  user_id: string;
  created_at: string;
  updated_at: string;
  message_count: number;
}

export interface ThreadRef {
  id: string;
  plan: ThreadPlan | undefined;
  live: LiveThread | undefined;
  userId: string;
  restricted: boolean;
}

export type ThreadLookup =
  | { status: 'ok'; thread: ThreadRef }
  | { status: 'deleted' | 'unknown'; thread: undefined };

/** What the export walk is at: the thread of the line just yielded (for the delete-before-history fault). */
export interface ExportCursor {
  threadId: string;
  plan: ThreadPlan | undefined;
  turn: number;
  live: LiveThread | undefined;
  liveTurn: LiveTurn | undefined;
}

export function newCursor(): ExportCursor {
  return { threadId: '', plan: undefined, turn: 0, live: undefined, liveTurn: undefined };
}

/** A record written through the API, rendered by JSON.stringify (rare: no fast path needed). */
function liveLine(cursor: ExportCursor): string {
  const live = present(cursor.live, 'the live thread of the cursor');
  const turn = present(cursor.liveTurn, 'the live turn of the cursor');
  const r = present(turn.reply, 'the reply of a live turn');
  return JSON.stringify({
    Input: turn.input,
    Response: r.cancelled ? '' : r.content,
    'Message ID': r.messageId,
    'Message Time': new Date(r.time).toISOString(),
    'Thread ID': live.id,
    'User ID': live.userId,
  });
}

const B_OPEN_INPUT = Buffer.from('{"Input":"', 'utf8');
const B_RESPONSE = Buffer.from('","Response":"', 'utf8');

const TAG_NAME = 0x2001;
const TAG_RENAME = 0x2002;
const TAG_INPUT = 0x2003;
const TAG_RESP = 0x2004;
const TAG_DETAILS = 0x2005;
const TAG_REC = 0x2006;
const TAG_FILE = 0x2007;
const TAG_REPLY_ID = 0x100;
const TAG_USER_MSG_ID = 0x200;
const TAG_USER_ID = 0x300;
const TAG_LIVE = 0x400;
const KEY_STRIDE = 8_388_608;

export class Dataset {
  readonly seed: number;
  readonly users: number;
  readonly recordsPerDay: number;
  readonly threadsPerDay: number;
  readonly startDay: number;
  readonly now: () => Date;
  readonly pool: TextPool;
  readonly userIds: string[];
  /** The user that threads created through the API belong to. */
  readonly apiUserId: string;
  private readonly live = new Map<string, LiveThread>();
  private readonly overlayByKey = new Map<number, LiveThread>();
  private seq = 0;

  constructor(opts: DatasetOptions) {
    this.seed = opts.seed >>> 0;
    this.users = Math.max(1, opts.users);
    this.recordsPerDay = Math.max(0, opts.recordsPerDay);
    this.threadsPerDay =
      this.recordsPerDay === 0 ? 0 : Math.max(EDGE_THREADS + 1, Math.round(this.recordsPerDay / AVG_TURNS));
    this.now = opts.now;
    this.startDay = opts.startDay ?? dayOf(opts.now().getTime()) - opts.days;
    this.pool = buildTextPool(this.seed);
    this.userIds = [];
    for (let u = 0; u < this.users; u++) this.userIds.push(uuidFromHash(this.seed, 0, u, TAG_USER_ID));
    this.apiUserId = uuidFromHash(this.seed, 1, 0, TAG_USER_ID);
  }

  nowMs(): number {
    return this.now().getTime();
  }

  /** Last day on which procedural threads are born: today (UTC). */
  lastDay(): number {
    return dayOf(this.nowMs());
  }

  nextId(tag: number): string {
    this.seq += 1;
    return uuidFromHash(this.seed, TAG_LIVE + tag, this.seq, 0x500);
  }

  // ---- procedural pieces --------------------------------------------------------------------

  private procExists(day: number, index: number): boolean {
    return day >= this.startDay && day <= this.lastDay() && index < this.threadsPerDay;
  }

  private baseName(plan: ThreadPlan, now: number): string {
    const rng = new Rng(hash4(this.seed, plan.day, plan.index, TAG_NAME));
    const name = makeThreadName(rng);
    if (plan.renameAt >= 0 && plan.renameAt <= now) {
      return `${makeThreadName(new Rng(hash4(this.seed, plan.day, plan.index, TAG_RENAME)))} (renamed)`;
    }
    return name;
  }

  private procFile(plan: ThreadPlan): CitedFile | undefined {
    if (!plan.hasFile) return undefined;
    const h = hash4(this.seed, plan.day, plan.index, TAG_FILE);
    return {
      file_id: `file-${h.toString(16).padStart(8, '0')}`,
      file_name: `upload-${(h & 0xffff).toString(16)}.pdf`,
    };
  }

  private turnCoord(plan: ThreadPlan, i: number): number {
    return plan.index * 16 + i;
  }

  private procInput(plan: ThreadPlan, i: number, escaped = false): string {
    const fileId = (plan.fileTurns >> i) & 1 ? this.procFile(plan)?.file_id : undefined;
    return makeInput(
      new Rng(hash4(this.seed, plan.day, this.turnCoord(plan, i), TAG_INPUT)),
      fileId,
      escaped,
    );
  }

  private procResponsePlan(plan: ThreadPlan, i: number) {
    return planResponse(new Rng(hash4(this.seed, plan.day, this.turnCoord(plan, i), TAG_RESP)));
  }

  private procReplyId(plan: ThreadPlan, i: number): string {
    return uuidFromHash(this.seed, plan.day, this.turnCoord(plan, i), TAG_REPLY_ID);
  }

  private procVisibleTurns(plan: ThreadPlan, live: LiveThread | undefined, now: number): number {
    const limit = live?.frozenAt !== undefined ? Math.min(now, live.frozenAt) : now;
    let n = 0;
    while (n < plan.turns && f64At(plan.replyTime, n) <= limit) n++;
    return n;
  }

  private procDeleted(plan: ThreadPlan, now: number): boolean {
    return plan.deleteAt >= 0 && plan.deleteAt <= now;
  }

  // ---- lookup --------------------------------------------------------------------------------

  lookup(threadId: string): ThreadLookup {
    const id = threadId.toLowerCase();
    const now = this.nowMs();
    const live = this.live.get(id);
    if (live && live.procKey === undefined) {
      if (live.deletedAt !== undefined) return { status: 'deleted', thread: undefined };
      return { status: 'ok', thread: { id, plan: undefined, live, userId: live.userId, restricted: false } };
    }
    const coord = decodeThreadId(this.seed, id);
    if (!coord || !this.procExists(coord.day, coord.index)) return { status: 'unknown', thread: undefined };
    const plan = planThread(this.seed, this.users, coord.day, coord.index, newPlan());
    if (f64At(plan.userTime, 0) > now) return { status: 'unknown', thread: undefined };
    if (this.procDeleted(plan, now) || live?.deletedAt !== undefined)
      return { status: 'deleted', thread: undefined };
    return {
      status: 'ok',
      thread: {
        id,
        plan,
        live,
        userId: itemAt(this.userIds, plan.userIndex),
        restricted: isRestrictedUser(plan.userIndex),
      },
    };
  }

  /** The live state of a thread, created on first write (for procedural threads: the overlay). */
  liveOf(ref: ThreadRef): LiveThread {
    if (ref.live) return ref.live;
    const plan = present(ref.plan, `the plan of thread ${ref.id}`);
    const procKey = plan.day * KEY_STRIDE + plan.index;
    const live: LiveThread = {
      id: ref.id,
      procKey,
      name: undefined,
      renamedAt: undefined,
      userId: ref.userId,
      createdAt: f64At(plan.userTime, 0),
      frozenAt: undefined,
      turns: [],
      files: new Map(),
      deletedAt: undefined,
    };
    this.live.set(ref.id, live);
    this.overlayByKey.set(procKey, live);
    ref.live = live;
    return live;
  }

  createThread(name: string): LiveThread {
    const id = this.nextId(1);
    const live: LiveThread = {
      id,
      procKey: undefined,
      name,
      renamedAt: undefined,
      userId: this.apiUserId,
      createdAt: this.nowMs(),
      frozenAt: undefined,
      turns: [],
      files: new Map(),
      deletedAt: undefined,
    };
    this.live.set(id, live);
    return live;
  }

  deleteThread(ref: ThreadRef): void {
    this.liveOf(ref).deletedAt = this.nowMs();
  }

  /** Deletes a thread by id if it exists (the delete-before-history fault). */
  deleteById(threadId: string): void {
    const found = this.lookup(threadId);
    if (found.status === 'ok') this.deleteThread(found.thread);
  }

  /**
   * Changes a thread's past as a service may (moderation, a regenerated answer): the entries now at
   * positions `remove` disappear, those at `rename` are served under a new message_id (same content
   * and artifacts). A client that stored the old history must re-read it. False when the thread
   * does not exist.
   */
  editHistory(threadId: string, edit: { remove?: number[]; rename?: number[] }): boolean {
    const found = this.lookup(threadId);
    if (found.status !== 'ok') return false;
    const entries = this.history(found.thread);
    const live = this.liveOf(found.thread);
    const e: HistoryEdit = live.historyEdit ?? { removed: new Set(), renamed: new Map() };
    live.historyEdit = e;
    for (const i of edit.rename ?? []) {
      const id = entries[i]?.message_id;
      if (id === undefined) continue;
      // The edit is keyed by the generated id, so that a second rename replaces the first.
      const original = [...e.renamed].find(([, to]) => to === id)?.[0] ?? id;
      e.renamed.set(original, this.nextId(6));
    }
    for (const i of edit.remove ?? []) {
      const id = entries[i]?.message_id;
      if (id === undefined) continue;
      e.removed.add([...e.renamed].find(([, to]) => to === id)?.[0] ?? id);
    }
    return true;
  }

  isDeleted(threadId: string): boolean {
    return this.lookup(threadId).status === 'deleted';
  }

  // ---- thread views ---------------------------------------------------------------------------

  threadEntry(ref: ThreadRef): ThreadEntry {
    const now = this.nowMs();
    const live = ref.live;
    let name: string;
    let count = 0;
    let updated = live?.createdAt ?? 0;
    let created = live?.createdAt ?? 0;
    if (ref.plan) {
      const plan = ref.plan;
      name = this.baseName(plan, now);
      const n = this.procVisibleTurns(plan, live, now);
      count = n * 2;
      created = f64At(plan.userTime, 0);
      updated = n > 0 ? f64At(plan.replyTime, n - 1) : created;
      if (plan.renameAt >= 0 && plan.renameAt <= now) updated = Math.max(updated, plan.renameAt);
    } else {
      name = present(live, `the live state of thread ${ref.id}`).name ?? '';
    }
    if (live) {
      if (live.name !== undefined) name = live.name;
      for (const turn of live.turns) {
        count += turn.reply ? 2 : 1;
        updated = Math.max(updated, turn.reply?.time ?? turn.userTime);
      }
      if (live.renamedAt !== undefined) updated = Math.max(updated, live.renamedAt);
      if (live.historyEdit) count = this.history(ref).length;
    }
    return {
      thread_id: ref.id,
      thread_name: name,
      user_id: ref.userId,
      created_at: new Date(created).toISOString(),
      updated_at: new Date(updated).toISOString(),
      message_count: count,
    };
  }

  /** Every thread that exists now and is not deleted: procedural by birth day, then API-created. */
  *threads(): Generator<ThreadRef> {
    // A plan of this walk's own: generators of concurrent requests interleave at every yield.
    const scratch = newPlan();
    const now = this.nowMs();
    const last = this.lastDay();
    for (let day = this.startDay; day <= last; day++) {
      for (let index = 0; index < this.threadsPerDay; index++) {
        const plan = planThread(this.seed, this.users, day, index, scratch);
        if (f64At(plan.userTime, 0) > now || this.procDeleted(plan, now)) continue;
        const live = this.overlayByKey.get(day * KEY_STRIDE + index);
        if (live?.deletedAt !== undefined) continue;
        yield {
          id: live?.id ?? encodeThreadId(this.seed, day, index),
          plan: planThread(this.seed, this.users, day, index, newPlan()),
          live,
          userId: itemAt(this.userIds, plan.userIndex),
          restricted: isRestrictedUser(plan.userIndex),
        };
      }
    }
    for (const live of this.live.values()) {
      if (live.procKey !== undefined || live.deletedAt !== undefined) continue;
      yield { id: live.id, plan: undefined, live, userId: live.userId, restricted: false };
    }
  }

  private procHistory(
    plan: ThreadPlan,
    live: LiveThread | undefined,
    now: number,
    out: HistoryEntry[],
  ): void {
    const n = this.procVisibleTurns(plan, live, now);
    const file = this.procFile(plan);
    for (let i = 0; i < n; i++) {
      out.push({
        message_id: uuidFromHash(this.seed, plan.day, this.turnCoord(plan, i), TAG_USER_MSG_ID),
        role: 'user',
        content: this.procInput(plan, i),
        created_at: new Date(f64At(plan.userTime, i)).toISOString(),
        citations: [],
        artifact_ids: [],
        status: 'completed',
      });
      const replyId = this.procReplyId(plan, i);
      const at = f64At(plan.replyTime, i);
      if (plan.cancelled[i]) {
        out.push(cancelledEntry(replyId, at));
        continue;
      }
      const content = renderResponse(this.pool, this.procResponsePlan(plan, i));
      const cites = (plan.fileTurns >> i) & 1 ? file : undefined;
      const details = this.procDetails(plan, i, content.length, cites);
      out.push(assistantEntry(replyId, content, at, details));
    }
  }

  private procDetails(
    plan: ThreadPlan,
    i: number,
    length: number,
    file: CitedFile | undefined,
  ): ReplyDetails {
    return replyDetails(
      hash4(this.seed, plan.day, this.turnCoord(plan, i), TAG_DETAILS),
      length,
      f64At(plan.replyTime, i),
      file,
    );
  }

  history(ref: ThreadRef): HistoryEntry[] {
    const now = this.nowMs();
    const out: HistoryEntry[] = [];
    if (ref.plan) this.procHistory(ref.plan, ref.live, now, out);
    for (const turn of ref.live?.turns ?? []) {
      out.push({
        message_id: turn.userMessageId,
        role: 'user',
        content: turn.input,
        created_at: new Date(turn.userTime).toISOString(),
        citations: [],
        artifact_ids: [],
        status: 'completed',
      });
      const r = turn.reply;
      if (!r) continue;
      out.push(
        r.cancelled
          ? cancelledEntry(r.messageId, r.time)
          : assistantEntry(r.messageId, r.content, r.time, r.details),
      );
    }
    const edit = ref.live?.historyEdit;
    if (!edit) return out;
    return out
      .filter((x) => !edit.removed.has(x.message_id))
      .map((x) => {
        const to = edit.renamed.get(x.message_id);
        return to === undefined ? x : { ...x, message_id: to };
      });
  }

  artifact(ref: ThreadRef, artifactId: string): ArtifactRef | undefined {
    const now = this.nowMs();
    if (ref.plan) {
      const plan = ref.plan;
      const n = this.procVisibleTurns(plan, ref.live, now);
      const file = this.procFile(plan);
      for (let i = 0; i < n; i++) {
        if (plan.cancelled[i]) continue;
        const length = renderResponse(this.pool, this.procResponsePlan(plan, i)).length;
        const details = this.procDetails(plan, i, length, (plan.fileTurns >> i) & 1 ? file : undefined);
        const found = details.artifacts.find((a) => a.artifact_id === artifactId);
        if (found) return found;
      }
    }
    for (const turn of ref.live?.turns ?? []) {
      const found = turn.reply?.details.artifacts.find((a) => a.artifact_id === artifactId);
      if (found) return found;
    }
    return undefined;
  }

  // ---- export -------------------------------------------------------------------------------

  /**
   * The lines of one UTC day's export as served now, without faults: procedural records (by
   * birth day, then thread, then turn; not sorted by time), then records written through the API.
   */
  *exportLines(day: number, cursor: ExportCursor = newCursor()): Generator<string> {
    for (const _ of this.walk(day, cursor)) {
      yield cursor.plan ? this.procLine(cursor.plan, cursor.turn, cursor.threadId) : liveLine(cursor);
    }
  }

  /**
   * The same lines as exportLines, each appended to `w` as UTF-8 (without newline); yields the
   * offset where each line starts. Built from pre-encoded pieces: this is the fast path of the
   * HTTP export and of writeExportDay.
   */
  *exportInto(day: number, w: ByteWriter, cursor: ExportCursor = newCursor()): Generator<number> {
    for (const _ of this.walk(day, cursor)) {
      const start = w.off;
      if (cursor.plan) this.procLineInto(cursor.plan, cursor.turn, cursor.threadId, w);
      else w.utf8(liveLine(cursor));
      yield start;
    }
  }

  /** How many lines the export of a day holds now (no rendering). */
  countLines(day: number): number {
    let n = 0;
    for (const _ of this.walk(day, newCursor())) n++;
    return n;
  }

  /** Visits the records of a day's export in serving order, describing each in `cursor`. */
  private *walk(day: number, cursor: ExportCursor): Generator<void> {
    const now = this.nowMs();
    const first = Math.max(this.startDay, day - MAX_SPAN_DAYS);
    const last = Math.min(day, this.lastDay());
    const dayStart = day * DAY_MS;
    const dayEnd = dayStart + DAY_MS;
    // A plan of this walk's own, not one shared by the dataset: a response awaits its socket
    // between lines, so the walks of concurrent exports interleave, and a shared plan rewritten
    // by another walk while this one is inside a thread lost and repeated lines.
    const plan = newPlan();
    const hasOverlay = this.overlayByKey.size > 0;
    cursor.live = undefined;
    cursor.liveTurn = undefined;
    for (let b = first; b <= last; b++) {
      for (let index = 0; index < this.threadsPerDay; index++) {
        planThread(this.seed, this.users, b, index, plan);
        if (
          f64At(plan.userTime, 0) > now ||
          f64At(plan.replyTime, 0) >= dayEnd ||
          this.procDeleted(plan, now)
        )
          continue;
        const live = hasOverlay ? this.overlayByKey.get(b * KEY_STRIDE + index) : undefined;
        if (live?.deletedAt !== undefined) continue;
        const frozen = live?.frozenAt ?? Number.POSITIVE_INFINITY;
        let threadId: string | undefined;
        for (let i = 0; i < plan.turns; i++) {
          const t = f64At(plan.replyTime, i);
          if (t < dayStart || t >= dayEnd || f64At(plan.arrival, i) > now || t > frozen) continue;
          threadId ??= encodeThreadId(this.seed, b, index);
          cursor.threadId = threadId;
          cursor.plan = plan;
          cursor.turn = i;
          yield;
        }
      }
    }
    cursor.plan = undefined;
    for (const live of this.live.values()) {
      if (live.deletedAt !== undefined) continue;
      for (const turn of live.turns) {
        const r = turn.reply;
        if (!r || r.time < dayStart || r.time >= dayEnd || r.time > now) continue;
        cursor.threadId = live.id;
        cursor.live = live;
        cursor.liveTurn = turn;
        yield;
      }
    }
  }

  /** Ids (some upper-cased), time and extra keys of a record: the ASCII part after the texts. */
  private recordTail(plan: ThreadPlan, i: number, threadId: string): string {
    const h = hash4(this.seed, plan.day, this.turnCoord(plan, i), TAG_REC);
    let mid = this.procReplyId(plan, i);
    let tid = threadId;
    let uid = itemAt(this.userIds, plan.userIndex);
    // About 5% of each id is written in upper case: UUIDs are case-insensitive and the export is loose.
    if ((h & 0xff) < 13) mid = mid.toUpperCase();
    if (((h >>> 8) & 0xff) < 13) tid = tid.toUpperCase();
    if (((h >>> 16) & 0xff) < 13) uid = uid.toUpperCase();
    const time = formatWithOffset(f64At(plan.replyTime, i), u8At(plan.offsetIdx, i));
    let extra = '';
    // About 10% of records carry fields the spec does not name.
    if (h >>> 24 < 26) {
      extra = `,"Model":"crs-research-2","Latency Ms":${f64At(plan.replyTime, i) - f64At(plan.userTime, i)}`;
    }
    return `","Message ID":"${mid}","Message Time":"${time}","Thread ID":"${tid}","User ID":"${uid}"${extra}}`;
  }

  private procLine(plan: ThreadPlan, i: number, threadId: string): string {
    const response = plan.cancelled[i]
      ? ''
      : renderResponseEscaped(this.pool, this.procResponsePlan(plan, i));
    return `{"Input":"${this.procInput(plan, i, true)}","Response":"${response}${this.recordTail(plan, i, threadId)}`;
  }

  private procLineInto(plan: ThreadPlan, i: number, threadId: string, w: ByteWriter): void {
    w.bytes(B_OPEN_INPUT);
    const fileId = (plan.fileTurns >> i) & 1 ? this.procFile(plan)?.file_id : undefined;
    writeInput(w, new Rng(hash4(this.seed, plan.day, this.turnCoord(plan, i), TAG_INPUT)), fileId);
    w.bytes(B_RESPONSE);
    if (!plan.cancelled[i]) writeResponse(w, this.pool, this.procResponsePlan(plan, i));
    w.ascii(this.recordTail(plan, i, threadId));
  }

  /** Seeds the details of a reply written through the API (deterministic per thread and turn). */
  liveDetailsSeed(threadId: string, turn: number): number {
    return hash4(this.seed, stringHash(threadId), turn, TAG_DETAILS);
  }

  liveResponse(threadId: string, turn: number): string {
    return renderResponse(
      this.pool,
      planResponse(new Rng(hash4(this.seed, stringHash(threadId), turn, TAG_RESP))),
    );
  }
}

function cancelledEntry(messageId: string, at: number): HistoryEntry {
  return {
    message_id: messageId,
    role: 'system',
    content: CANCELLED_TEXT,
    created_at: new Date(at).toISOString(),
    citations: [],
    artifact_ids: [],
    status: 'cancelled',
  };
}
