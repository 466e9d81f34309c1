import { z } from 'zod';
import { CrsError } from '../errors.ts';

/**
 * Settings of the worker process only (the shared configuration in src/config.ts covers the
 * connection and the task queue). Read from the same environment, with the same all-problems-
 * at-once reporting.
 */
const schema = z.object({
  // Activity slots of this worker: day loads and enrichment batches running at once here.
  TEMPORAL_MAX_CONCURRENT_ACTIVITIES: z.coerce.number().int().min(1).max(1000).default(16),
  // Export day loads at once in this worker; each holds CRS_LOAD_CONNECTIONS database connections.
  TEMPORAL_MAX_CONCURRENT_DAY_LOADS: z.coerce.number().int().min(1).max(64).default(2),
  TEMPORAL_MAX_CONCURRENT_WORKFLOW_TASKS: z.coerce.number().int().min(2).max(1000).default(40),
  // Activities started per second across every worker of the task queue (the server enforces
  // it): the global brake on load against the service. Unset: no task-queue limit.
  TEMPORAL_TASK_QUEUE_ACTIVITIES_PER_SECOND: z.coerce.number().positive().max(100_000).optional(),
  // Prometheus /metrics of the SDK; empty turns it off.
  TEMPORAL_METRICS_ADDRESS: z.string().default('0.0.0.0:9464'),
  // How long in-flight activities may finish after SIGTERM before they are cancelled (their
  // checkpoint lets another worker resume them).
  TEMPORAL_SHUTDOWN_GRACE: z
    .string()
    .regex(/^\d+(ms|s|m)$/, 'a duration such as 30s')
    .default('30s'),
});

export interface WorkerSettings {
  maxConcurrentActivities: number;
  maxConcurrentWorkflowTasks: number;
  /** Default 2 (activities/index.ts DEFAULT_MAX_DAY_LOADS). */
  maxConcurrentDayLoads?: number;
  taskQueueActivitiesPerSecond: number | undefined;
  metricsAddress: string | undefined;
  shutdownGraceTime: string;
}

export function parseWorkerSettings(env: Record<string, string | undefined> = process.env): WorkerSettings {
  const r = schema.safeParse(env);
  if (!r.success) {
    const problems = r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new CrsError('CONFIG_INVALID', `invalid configuration:\n  - ${problems.join('\n  - ')}`, {
      details: { problems },
    });
  }
  const e = r.data;
  return {
    maxConcurrentActivities: e.TEMPORAL_MAX_CONCURRENT_ACTIVITIES,
    maxConcurrentWorkflowTasks: e.TEMPORAL_MAX_CONCURRENT_WORKFLOW_TASKS,
    maxConcurrentDayLoads: e.TEMPORAL_MAX_CONCURRENT_DAY_LOADS,
    taskQueueActivitiesPerSecond: e.TEMPORAL_TASK_QUEUE_ACTIVITIES_PER_SECOND,
    metricsAddress: e.TEMPORAL_METRICS_ADDRESS.trim() === '' ? undefined : e.TEMPORAL_METRICS_ADDRESS.trim(),
    shutdownGraceTime: e.TEMPORAL_SHUTDOWN_GRACE,
  };
}
