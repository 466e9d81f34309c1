import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';

/** Who ran what, and how big the histories are, read from the workflow histories themselves. */
export interface HistoryTally {
  /** Completed activities by worker identity, then by activity type. */
  byWorker: Map<string, Map<string, number>>;
  /** The identity that completed each day's export load (the day from the syncDay input). */
  dayWorker: Map<string, string>;
  /** Every execution's history: workflow type, events and encoded bytes. */
  sizes: { workflowId: string; type: string; events: number; bytes: number }[];
}

// A CommonJS module: its namespaces come through the default export under Node's ESM loader.
const { temporal } = proto;
const { EventType } = temporal.api.enums.v1;

/**
 * Reads every execution the query lists (e.g. all of a namespace, or ExecutionTime > X) and
 * tallies the identity on each completed activity's started event: Temporal writes it when the
 * attempt that finished started, so a killed worker's lost attempts count for nobody.
 */
export async function tallyHistories(client: Client, query?: string): Promise<HistoryTally> {
  const byWorker = new Map<string, Map<string, number>>();
  const dayWorker = new Map<string, string>();
  const sizes: HistoryTally['sizes'] = [];
  for await (const e of client.workflow.list(query ? { query } : {})) {
    const history = await client.workflow.getHandle(e.workflowId, e.runId).fetchHistory();
    const events = history.events ?? [];
    sizes.push({
      workflowId: e.workflowId,
      type: e.type,
      events: events.length,
      bytes: temporal.api.history.v1.History.encode(history).finish().length,
    });
    const scheduled = new Map<string, string>();
    const startedBy = new Map<string, string>();
    let day: string | undefined;
    for (const ev of events) {
      const id = String(ev.eventId);
      if (ev.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED && e.type === 'syncDay') {
        day = e.workflowId.slice(-10);
      } else if (ev.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED) {
        scheduled.set(id, ev.activityTaskScheduledEventAttributes?.activityType?.name ?? '?');
      } else if (ev.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED) {
        const a = ev.activityTaskStartedEventAttributes;
        startedBy.set(String(a?.scheduledEventId), a?.identity ?? '?');
      } else if (ev.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED) {
        const sid = String(ev.activityTaskCompletedEventAttributes?.scheduledEventId);
        const who = startedBy.get(sid) ?? '?';
        const type = scheduled.get(sid) ?? '?';
        const mine = byWorker.get(who) ?? new Map<string, number>();
        mine.set(type, (mine.get(type) ?? 0) + 1);
        byWorker.set(who, mine);
        if (type === 'loadExportDay' && day) dayWorker.set(day, who);
      }
    }
  }
  return { byWorker, dayWorker, sizes };
}
