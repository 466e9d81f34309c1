/**
 * A webhook receiver for trying crs-sync's alerts on one machine, without Slack or a relay
 * (docs/operations.md, "One machine, no Docker, step by step"): it takes every POST, prints one
 * line per message (the time it came, and the message's `text`: severity, state, kind and
 * summary), answers 200, and stops on SIGTERM or SIGINT.
 *
 *   node scripts/webhook-receiver.ts [--port 9000] [--host 127.0.0.1]
 *
 * A body that is not a JSON object with a `text` is answered 400 and printed as refused; a body
 * over 1 MiB is answered 413 unread. Any path is accepted, so a secret-looking path works too.
 */
import http from 'node:http';
import { parseArgs } from 'node:util';

const MAX_BODY_BYTES = 1 << 20;

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '9000' },
    host: { type: 'string', default: '127.0.0.1' },
  },
});
const port = Number(values.port);
if (!/^\d+$/.test(values.port) || port > 65535) {
  process.stderr.write(`webhook-receiver: --port must be an integer in 0..65535, got "${values.port}"\n`);
  process.exit(2);
}

/** The message's one line: its `text`, control characters escaped so a line stays a line. */
function lineOf(body: string): string | undefined {
  try {
    const m = JSON.parse(body) as { text?: unknown };
    if (m === null || typeof m !== 'object' || typeof m.text !== 'string') return undefined;
    return JSON.stringify(m.text).slice(1, -1);
  } catch {
    return undefined;
  }
}

const server = http.createServer((req, res) => {
  if (req.method !== 'POST') {
    res.writeHead(405, { allow: 'POST' }).end('POST only\n');
    return;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (c: Buffer) => {
    size += c.length;
    if (size > MAX_BODY_BYTES) {
      res.writeHead(413, { connection: 'close' }).end('too large\n');
      req.destroy();
      return;
    }
    chunks.push(c);
  });
  req.on('end', () => {
    if (res.writableEnded) return;
    const line = lineOf(Buffer.concat(chunks).toString('utf8'));
    const at = new Date().toISOString();
    if (line === undefined) {
      process.stdout.write(`${at} refused: not a JSON object with a "text" (${size} bytes)\n`);
      res.writeHead(400).end('expected a JSON object with "text"\n');
      return;
    }
    process.stdout.write(`${at} ${line}\n`);
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
  });
});

server.listen(port, values.host, () => {
  const a = server.address();
  const shown = a && typeof a === 'object' ? `${values.host}:${a.port}` : `${values.host}:${port}`;
  process.stdout.write(
    `webhook receiver listening on http://${shown}/ (any path); SIGTERM or Ctrl-C stops it\n`,
  );
});
server.on('error', (err) => {
  process.stderr.write(`webhook-receiver: ${err.message}\n`);
  process.exit(1);
});
for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  process.once(sig, () => {
    server.close(() => {
      process.stdout.write('webhook receiver stopped\n');
      process.exit(0);
    });
    server.closeAllConnections();
  });
}
