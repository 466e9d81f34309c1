import type { ServerResponse } from 'node:http';
import type { Citation, CitedFile, ReplyDetails } from './content.ts';
import { assistantEntry, replyDetails } from './content.ts';
import type { Dataset, LiveThread, LiveTurn } from './dataset.ts';

/**
 * Tasks queued by "send message" (spec §4.5): each runs as a few timed steps (reasoning, message
 * chunks, artifacts, final message, completion), emitted as SSE events (§4.11) and recorded so a
 * late subscriber gets a replay. Cancel (§4.8) stops the steps and records "User cancelled".
 */

export type TaskStatus = 'queued' | 'running' | 'completed' | 'cancelled';

export interface SseEvent {
  event: string;
  data: unknown;
}

export interface Task {
  id: string;
  threadId: string;
  status: TaskStatus;
  stepsTotal: number;
  stepsDone: number;
  events: SseEvent[];
  turn: LiveTurn;
  replyMessageId: string;
  /** Open streams, each with how many more events it may carry before a cut fault (undefined: no cut). */
  subscribers: Map<ServerResponse, number | undefined>;
  timer: NodeJS.Timeout | undefined;
  steps: Array<() => void>;
  updatedAt: number;
}

const CHUNKS = 4;

/** Drops the connection once what was written is out: the client sees the stream end early. */
function cutStream(res: ServerResponse): void {
  if (!res.headersSent) res.flushHeaders();
  res.write('', () => res.socket?.destroy());
}

export function writeSse(res: ServerResponse, id: number, ev: SseEvent): void {
  res.write(`event: ${ev.event}\nid: ${id}\ndata: ${JSON.stringify(ev.data)}\n\n`);
}

export class TaskRunner {
  private readonly ds: Dataset;
  private readonly stepMs: number;
  private readonly tasks = new Map<string, Task>();

  constructor(ds: Dataset, stepMs: number) {
    this.ds = ds;
    this.stepMs = stepMs;
  }

  current(threadId: string): Task | undefined {
    return this.tasks.get(threadId);
  }

  isBusy(threadId: string): boolean {
    const t = this.tasks.get(threadId);
    return t !== undefined && (t.status === 'queued' || t.status === 'running');
  }

  start(live: LiveThread, input: string): Task {
    const ds = this.ds;
    const now = ds.nowMs();
    if (live.procKey !== undefined && live.frozenAt === undefined) live.frozenAt = now;
    const turn: LiveTurn = { userMessageId: ds.nextId(2), input, userTime: now };
    live.turns.push(turn);
    const turnNo = live.turns.length;
    const content = ds.liveResponse(live.id, turnNo);
    const file = citedFile(live, input);
    const details = replyDetails(ds.liveDetailsSeed(live.id, turnNo), content.length, now, file);
    const task: Task = {
      id: `task_${ds.nextId(3).replaceAll('-', '').slice(0, 20)}`,
      threadId: live.id,
      status: 'queued',
      stepsTotal: 0,
      stepsDone: 0,
      events: [],
      turn,
      replyMessageId: ds.nextId(4),
      subscribers: new Map(),
      timer: undefined,
      steps: [],
      updatedAt: now,
    };
    task.steps = this.plan(task, content, details);
    task.stepsTotal = task.steps.length;
    this.tasks.set(live.id, task);
    this.schedule(task);
    return task;
  }

  private plan(task: Task, content: string, details: ReplyDetails): Array<() => void> {
    const steps: Array<() => void> = [];
    steps.push(() =>
      this.emit(task, 'reasoning', { task_id: task.id, text: 'Reading the question and planning searches.' }),
    );
    steps.push(() =>
      this.emit(task, 'reasoning', {
        task_id: task.id,
        text: `Consulting ${details.citations.length} sources.`,
      }),
    );
    const size = Math.ceil(content.length / CHUNKS);
    for (let i = 0; i < CHUNKS; i++) {
      const start = i * size;
      const end = i === CHUNKS - 1 ? content.length + 1 : (i + 1) * size;
      const cites: Citation[] = details.citations.filter(
        (c) => c.inline_offset >= start && c.inline_offset < end,
      );
      steps.push(() =>
        this.emit(task, 'message_chunk', {
          task_id: task.id,
          message_id: task.replyMessageId,
          index: i,
          delta: content.slice(start, Math.min(end, content.length)),
          citations: cites,
        }),
      );
    }
    for (const a of details.artifacts) {
      steps.push(() =>
        this.emit(task, 'artifact', {
          task_id: task.id,
          message_id: task.replyMessageId,
          artifact_id: a.artifact_id,
          artifact: a.artifact,
        }),
      );
    }
    steps.push(() => {
      const time = this.ds.nowMs();
      task.turn.reply = { messageId: task.replyMessageId, content, time, cancelled: false, details };
      this.emit(task, 'final_message', {
        task_id: task.id,
        message: assistantEntry(task.replyMessageId, content, time, details),
      });
      task.status = 'completed';
      this.emit(task, 'completion', {
        task_id: task.id,
        status: 'completed',
        message_id: task.replyMessageId,
      });
      this.closeSubscribers(task);
    });
    return steps;
  }

  private schedule(task: Task): void {
    task.timer = setTimeout(() => {
      task.timer = undefined;
      if (task.status !== 'queued' && task.status !== 'running') return;
      task.status = 'running';
      const step = task.steps[task.stepsDone];
      task.stepsDone += 1;
      task.updatedAt = this.ds.nowMs();
      step?.();
      if (task.status === 'running') this.schedule(task);
    }, this.stepMs);
  }

  private emit(task: Task, event: string, data: unknown): void {
    const ev = { event, data };
    task.events.push(ev);
    const id = task.events.length - 1;
    for (const [res, budget] of task.subscribers) {
      if (budget !== undefined && (budget <= 0 || event === 'completion')) {
        task.subscribers.delete(res);
        cutStream(res);
        continue;
      }
      writeSse(res, id, ev);
      if (budget !== undefined) task.subscribers.set(res, budget - 1);
    }
  }

  private closeSubscribers(task: Task): void {
    for (const res of task.subscribers.keys()) res.end();
    task.subscribers.clear();
  }

  /** Cancels the queued or running task of a thread; returns it, or undefined when none runs. */
  cancel(threadId: string): Task | undefined {
    const task = this.tasks.get(threadId);
    if (!task || (task.status !== 'queued' && task.status !== 'running')) return undefined;
    if (task.timer) clearTimeout(task.timer);
    task.timer = undefined;
    const time = this.ds.nowMs();
    task.turn.reply = {
      messageId: task.replyMessageId,
      content: '',
      time,
      cancelled: true,
      details: { citations: [], artifacts: [] },
    };
    task.status = 'cancelled';
    task.updatedAt = time;
    this.emit(task, 'completion', { task_id: task.id, status: 'cancelled', message_id: task.replyMessageId });
    this.closeSubscribers(task);
    return task;
  }

  /** A deleted thread's task stops without a trace. */
  drop(threadId: string): void {
    const task = this.tasks.get(threadId);
    if (!task) return;
    if (task.timer) clearTimeout(task.timer);
    this.closeSubscribers(task);
    this.tasks.delete(threadId);
  }

  /**
   * Replays the task's events to a new subscriber, then follows it live until completion. With
   * `cutAfter` (the cut fault) the connection drops after that many events, before completion.
   */
  subscribe(threadId: string, res: ServerResponse, cutAfter?: number): void {
    const task = this.tasks.get(threadId);
    if (!task) {
      if (cutAfter !== undefined) {
        cutStream(res);
        return;
      }
      writeSse(res, 0, { event: 'completion', data: { task_id: null, status: 'idle', message_id: null } });
      res.end();
      return;
    }
    let budget = cutAfter;
    for (const [i, ev] of task.events.entries()) {
      if (budget !== undefined && (budget <= 0 || ev.event === 'completion')) {
        cutStream(res);
        return;
      }
      writeSse(res, i, ev);
      if (budget !== undefined) budget--;
    }
    if (task.status === 'completed' || task.status === 'cancelled') {
      res.end();
      return;
    }
    task.subscribers.set(res, budget);
    res.on('close', () => task.subscribers.delete(res));
  }

  closeAll(): void {
    for (const task of this.tasks.values()) {
      if (task.timer) clearTimeout(task.timer);
      task.timer = undefined;
      this.closeSubscribers(task);
    }
  }
}

/** The thread's uploaded file named in the message, if any (answered with a custom_doc citation). */
function citedFile(live: LiveThread, input: string): CitedFile | undefined {
  for (const f of live.files.values()) {
    if (input.includes(f.file_id)) return { file_id: f.file_id, file_name: f.file_name };
  }
  return undefined;
}
