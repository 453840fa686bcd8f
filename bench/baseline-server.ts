/**
 * Baselines measured in the same run as the service:
 * - static: an Express handler answering the bytes given by POST /__set
 *   (the exact body, content type and status the service answered);
 * - fsync: an Express handler that appends the request body to a file and
 *   answers once it is on disk, with group commit: the bodies that arrive
 *   while one fdatasync runs are written together and share the next one.
 *   That is the limit of a durable write on this disk, the bar the
 *   service's own group-committing journal is held to.
 * - postgres: an Express handler that inserts the request body as one row
 *   into PostgreSQL (`BENCH_POSTGRES_URL`, a pool of 10 connections as the
 *   cluster store keeps, synchronous commit) and answers once it committed:
 *   the bar for a write of the cluster store, whose acknowledgement is the
 *   same commit.
 */
import express from 'express';
import { mkdtempSync } from 'node:fs';
import { open } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

const mode = process.argv[2];
const app = express();
app.disable('x-powered-by');
app.get('/ready', (_req, res) => { res.send('ok'); });

if (mode === 'static') {
  let body = Buffer.from('{}');
  let type = 'application/json; charset=utf-8';
  app.post('/__set', express.raw({ type: () => true, limit: '50mb' }), (req, res) => {
    body = Buffer.from(req.body as Uint8Array);
    type = String(req.headers['x-content-type'] ?? type);
    res.send('ok');
  });
  app.use((_req, res) => { res.type(type).send(body); });
} else if (mode === 'fsync') {
  const file = await open(path.join(mkdtempSync(path.join(os.tmpdir(), 'wsm-bench-fsync-')), 'log'), 'a');
  let waiting: Array<{ line: string; done: (err?: Error) => void }> = [];
  let flushing = false;
  const flush = async (): Promise<void> => {
    flushing = true;
    try {
      while (waiting.length) {
        const batch = waiting;
        waiting = [];
        try {
          await file.write(batch.map((w) => w.line).join(''));
          await file.datasync();
          for (const w of batch) w.done();
        } catch (err) {
          for (const w of batch) w.done(err as Error);
        }
      }
    } finally {
      flushing = false;
    }
  };
  app.use(express.json());
  app.post('/write', (req, res) => {
    waiting.push({
      line: `${JSON.stringify(req.body)}\n`,
      done: (err) => { if (err) res.status(500).json({ success: false, error: { message: err.message } }); else res.status(200).json({ success: true, data: req.body as unknown }); },
    });
    // Fire-and-forget: one flush loop at a time drains the queue; it
    // catches every write error and answers the requests it concerns.
    if (!flushing) void flush();
  });
} else if (mode === 'postgres') {
  const { default: pg } = await import('pg');
  const pool = new pg.Pool({ connectionString: process.env.BENCH_POSTGRES_URL, max: 10 });
  await pool.query('CREATE TABLE IF NOT EXISTS bench_writes (id bigserial PRIMARY KEY, body text NOT NULL)');
  app.use(express.json());
  app.post('/write', (req, res) => {
    pool.query('INSERT INTO bench_writes (body) VALUES ($1)', [JSON.stringify(req.body)]).then(
      () => { res.status(200).json({ success: true, data: req.body as unknown }); },
      (err: Error) => { res.status(500).json({ success: false, error: { message: err.message } }); },
    );
  });
} else {
  throw new Error(`unknown baseline mode ${mode}`);
}

app.listen(Number(process.env.PORT), process.env.HOST ?? '127.0.0.1');
