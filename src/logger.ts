import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * Structured JSON logs on stdout, written asynchronously: a line is added
 * to a buffer and the buffer goes to stdout in the background, many lines
 * per write while the service is busy, instead of one synchronous write per
 * line on the event loop, which a slow reader of stdout (a pipe, a log
 * collector) would hold. pino writes what is still buffered when the
 * process exits (`process.exit`, the end of a clean shutdown, an uncaught
 * error); a process killed outright loses at most the lines of the write in
 * flight.
 */
export function createLogger(level: string): Logger {
  return pino({ level, base: { service: 'wsm' }, timestamp: pino.stdTimeFunctions.isoTime }, pino.destination({ dest: 1, sync: false }));
}
