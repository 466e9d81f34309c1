import type { LogLevel, LogMetadata, Logger as SdkLogger } from '@temporalio/common';
import type { Logger } from '../log.ts';

const LEVELS: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

/** The Temporal SDK's logs (worker, workflow and activity loggers, forwarded core logs) into pino. */
export function pinoSdkLogger(log: Logger): SdkLogger {
  const sdk = log.child({ component: 'temporal' });
  const write = (level: LogLevel, message: string, meta?: LogMetadata) => {
    // Errors under `err` go through the logger's serializer (message, stack, redaction).
    const { error, ...rest } = meta ?? {};
    sdk[LEVELS[level] ?? 'info'](error === undefined ? rest : { ...rest, err: error }, message);
  };
  return {
    log: write,
    trace: (m, meta) => write('TRACE', m, meta),
    debug: (m, meta) => write('DEBUG', m, meta),
    info: (m, meta) => write('INFO', m, meta),
    warn: (m, meta) => write('WARN', m, meta),
    error: (m, meta) => write('ERROR', m, meta),
  };
}
