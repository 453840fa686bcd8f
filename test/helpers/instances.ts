import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import supertest from 'supertest';
import { freePort } from './ports.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** A service instance running as a child process (`wsm serve`), so a test can kill it. */
export interface InstanceProcess {
  port: number;
  url: string;
  http: ReturnType<typeof supertest>;
  child: ChildProcess;
  /** Settles once the process has exited. */
  exited: Promise<unknown>;
  /** Sends `signal` (SIGKILL by default) unless the process already ended; resolves once it has exited. */
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Starts `wsm serve` in a child process on a free loopback port with
 * `dataDir`, the environment of this process and `env`; resolves once its
 * `/health` answers 200 (rejects if it exits first or does not within a minute).
 */
export async function spawnInstance(env: Record<string, string>, dataDir: string): Promise<InstanceProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'src/cli.ts'), 'serve'], {
    cwd: root,
    env: { ...process.env, WSM_LOG_LEVEL: 'warn', ...env, PORT: String(port), HOST: '127.0.0.1', WSM_DATA_DIR: dataDir, WSM_DEMO: 'false' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  // The end of its error output, for the message when it does not start.
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => { stderr = (stderr + chunk).slice(-4000); });
  let ended = false;
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => { ended = true; resolve(signal ?? code); }));
  const url = `http://127.0.0.1:${port}`;
  const kill = async (signal: NodeJS.Signals = 'SIGKILL') => {
    if (!ended) child.kill(signal);
    await exited;
  };
  let up = false;
  for (let i = 0; i < 2400 && !up && !ended; i++) {
    try { up = (await fetch(`${url}/health`)).ok; } catch { /* starting */ }
    if (!up) await new Promise((r) => setTimeout(r, 25));
  }
  if (!up) {
    await kill();
    throw new Error(`the instance on port ${port} did not start (${ended ? `it exited: ${child.exitCode ?? child.signalCode}` : 'no answer from /health'}):\n${stderr.trim()}`);
  }
  return { port, url, http: supertest(url), child, exited, kill };
}
