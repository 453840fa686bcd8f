/**
 * Baselines measured in the same run as the service:
 * - static: an Express handler answering the bytes given by POST /__set
 *   (the exact body, content type and status the service answered);
 * - fsync: an Express handler that appends the request body to a file and
 *   fsyncs before answering (the minimal durable HTTP write).
 */
import express from 'express';
import { openSync, writeSync, fsyncSync, mkdtempSync } from 'node:fs';
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
  const fd = openSync(path.join(mkdtempSync(path.join(os.tmpdir(), 'wsm-bench-fsync-')), 'log'), 'a');
  app.use(express.json());
  app.post('/write', (req, res) => {
    writeSync(fd, `${JSON.stringify(req.body)}\n`);
    fsyncSync(fd);
    res.status(200).json({ success: true, data: req.body });
  });
} else {
  throw new Error(`unknown baseline mode ${mode}`);
}

app.listen(Number(process.env.PORT), process.env.HOST ?? '127.0.0.1');
