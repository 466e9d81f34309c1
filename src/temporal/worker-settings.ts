import { z } from 'zod';
import { numberSetting, optionalNumberSetting } from '../config.ts';
import { CrsError } from '../errors.ts';

/**
 * Settings of the worker process only (the shared configuration in src/config.ts covers the
 * connection and the task queue). Read from the same environment, with the same all-problems-
 * at-once reporting.
 */
const schema = z.object({
  // Activity slots of this worker: day loads and enrichment batches running at once here.
  TEMPORAL_MAX_CONCURRENT_ACTIVITIES: numberSetting(16, { min: 1, max: 1000, whole: true }),
  // Export day loads at once in this worker; each holds CRS_LOAD_PARTITIONS database connections.
  TEMPORAL_MAX_CONCURRENT_DAY_LOADS: numberSetting(2, { min: 1, max: 64, whole: true }),
  TEMPORAL_MAX_CONCURRENT_WORKFLOW_TASKS: numberSetting(40, { min: 2, max: 1000, whole: true }),
  // Activities started per second across every worker of the task queue (the server enforces
  // it): the global brake on load against the service. Unset: no task-queue limit.
  TEMPORAL_TASK_QUEUE_ACTIVITIES_PER_SECOND: optionalNumberSetting({
    min: 0,
    max: 100_000,
    whole: false,
    aboveMin: true,
  }),
  // The worker's /metrics (the pipeline's series and the SDK's): a port, 0 turns it off. A taken
  // port is not an error: the next METRICS_SPARE_PORTS ports are tried (src/metrics/server.ts).
  CRS_METRICS_PORT: optionalNumberSetting({ min: 0, max: 65_535, whole: true }),
  CRS_METRICS_HOST: z.string().trim().min(1).default('0.0.0.0'),
  // The older setting, host:port (empty: off); CRS_METRICS_PORT wins when both are set.
  TEMPORAL_METRICS_ADDRESS: z
    .string()
    .trim()
    .regex(/^$|^(\[[0-9a-fA-F:.]+\]|[^\s:]+):\d{1,5}$/, 'host:port, such as 0.0.0.0:9464, or empty for none')
    .optional(),
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
  /** Where /metrics listens; undefined: no metrics endpoint (and no SDK exporter). */
  metrics: { host: string; port: number } | undefined;
  shutdownGraceTime: string;
}

export const DEFAULT_METRICS_PORT = 9464;
/** Ports tried after a taken CRS_METRICS_PORT: room for a few workers on one host. */
export const METRICS_SPARE_PORTS = 9;

function metricsListen(e: z.infer<typeof schema>): WorkerSettings['metrics'] {
  if (e.CRS_METRICS_PORT === undefined && e.TEMPORAL_METRICS_ADDRESS !== undefined) {
    const address = e.TEMPORAL_METRICS_ADDRESS;
    if (address === '') return undefined;
    const colon = address.lastIndexOf(':');
    const host = address.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
    const port = Number(address.slice(colon + 1));
    return port === 0 ? undefined : { host, port };
  }
  const port = e.CRS_METRICS_PORT ?? DEFAULT_METRICS_PORT;
  return port === 0 ? undefined : { host: e.CRS_METRICS_HOST, port };
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
    metrics: metricsListen(e),
    shutdownGraceTime: e.TEMPORAL_SHUTDOWN_GRACE,
  };
}

/** Every setting the worker reads besides the shared configuration, as `worker --help` lists them. */
export const WORKER_SETTINGS_HELP: readonly {
  name: keyof z.infer<typeof schema>;
  def: string;
  what: string;
}[] = [
  {
    name: 'TEMPORAL_MAX_CONCURRENT_ACTIVITIES',
    def: '16',
    what: 'activity slots of this worker (day loads and enrichment batches at once)',
  },
  {
    name: 'TEMPORAL_MAX_CONCURRENT_DAY_LOADS',
    def: '2',
    what: 'export day loads at once here; each holds CRS_LOAD_PARTITIONS connections',
  },
  { name: 'TEMPORAL_MAX_CONCURRENT_WORKFLOW_TASKS', def: '40', what: 'workflow task slots' },
  {
    name: 'TEMPORAL_TASK_QUEUE_ACTIVITIES_PER_SECOND',
    def: 'unset',
    what: 'activities started per second across every worker of the task queue (server-enforced)',
  },
  {
    name: 'TEMPORAL_SHUTDOWN_GRACE',
    def: '30s',
    what: 'on SIGTERM/SIGINT, how long running activities may finish',
  },
  {
    name: 'CRS_METRICS_PORT',
    def: String(DEFAULT_METRICS_PORT),
    what: 'Prometheus /metrics port (0: off; a taken port: the next free one)',
  },
  { name: 'CRS_METRICS_HOST', def: '0.0.0.0', what: 'the address /metrics listens on' },
  {
    name: 'TEMPORAL_METRICS_ADDRESS',
    def: 'unset',
    what: 'the older host:port setting, read when CRS_METRICS_PORT is unset',
  },
];

/** The names the worker's settings schema reads (a test holds the help list to it). */
export const WORKER_SETTING_NAMES: readonly string[] = Object.keys(schema.shape);
