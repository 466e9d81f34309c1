import { createServer, type Server } from 'node:http';
import { request } from 'undici';
import { errorMessage } from '../errors.ts';
import type { Logger } from '../log.ts';
import { pipelineMetricsText, registry } from './pipeline.ts';

export interface MetricsServerOptions {
  host: string;
  port: number;
  /** Ports tried after `port` when it is taken (port+1 … port+spare). */
  spare: number;
  /** host:port of the Temporal SDK's own exporter, whose exposition each scrape appends. */
  sdkAddress?: string | undefined;
  log: Logger;
}

export interface MetricsServer {
  readonly port: number;
  readonly url: string;
  close(): Promise<void>;
}

const SDK_TIMEOUT_MS = 2_000;

/**
 * Serves GET /metrics: the pipeline's series, then the SDK's. A port another process holds never
 * stops the worker: the next ports are tried, and one warning says where metrics went (or that
 * this worker has none); the answer is undefined then.
 */
export async function serveMetrics(o: MetricsServerOptions): Promise<MetricsServer | undefined> {
  const server = createServer((req, res) => {
    if (req.url?.split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: metrics are at /metrics\n');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    exposition(o.sdkAddress).then(
      (text) =>
        res.writeHead(200, { 'content-type': registry.contentType }).end(req.method === 'HEAD' ? '' : text),
      (err: unknown) => {
        o.log.warn({ error: errorMessage(err) }, 'metrics: a scrape failed');
        res.writeHead(500, { 'content-type': 'text/plain' }).end('metrics could not be collected\n');
      },
    );
  });
  const last = o.port + o.spare;
  for (let port = o.port; port <= last; port++) {
    const err = await listen(server, o.host, port);
    if (!err) {
      if (port !== o.port)
        o.log.warn(
          { taken: o.port, port },
          `metrics: port ${o.port} is taken (another worker on this host?); serving /metrics on port ${port} instead`,
        );
      return {
        port,
        url: `http://${o.host.includes(':') ? `[${o.host}]` : o.host}:${port}/metrics`,
        close: () => new Promise((resolve) => server.close(() => resolve())),
      };
    }
    if (err.code !== 'EADDRINUSE') {
      o.log.warn(
        { host: o.host, port, error: err.message },
        'metrics: cannot listen there; this worker runs without a metrics endpoint',
      );
      return undefined;
    }
  }
  o.log.warn(
    { from: o.port, to: last },
    `metrics: ports ${o.port}-${last} are all taken; this worker runs without a metrics endpoint (set CRS_METRICS_PORT)`,
  );
  return undefined;
}

function listen(server: Server, host: string, port: number): Promise<NodeJS.ErrnoException | undefined> {
  return new Promise((resolve) => {
    const done = (err?: NodeJS.ErrnoException) => {
      server.off('listening', onListening);
      server.off('error', done);
      resolve(err);
    };
    const onListening = () => done();
    server.once('listening', onListening);
    server.once('error', done);
    server.listen(port, host);
  });
}

async function exposition(sdkAddress: string | undefined): Promise<string> {
  const ours = await pipelineMetricsText();
  if (!sdkAddress) return ours;
  return `${ours}\n${await sdkExposition(sdkAddress)}`;
}

/** The SDK's exporter, on loopback; a comment in its place when it does not answer. */
async function sdkExposition(address: string): Promise<string> {
  try {
    const r = await request(`http://${address}/metrics`, {
      headersTimeout: SDK_TIMEOUT_MS,
      bodyTimeout: SDK_TIMEOUT_MS,
    });
    const text = await r.body.text();
    if (r.statusCode !== 200) return `# the Temporal SDK's metrics answered HTTP ${r.statusCode}\n`;
    return text.endsWith('\n') ? text : `${text}\n`;
  } catch (err) {
    return `# the Temporal SDK's metrics did not answer: ${errorMessage(err).replace(/\s+/g, ' ')}\n`;
  }
}
