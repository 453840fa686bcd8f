import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Runs the real CLI (`src/cli.ts` through tsx) as a child process. */
export function runWsm(args: string[], env: Record<string, string> = {}, timeoutMs = 20_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runScript('src/cli.ts', args, env, timeoutMs);
}

/** Runs a TypeScript file of the project (`scripts/balancer.ts`) through tsx as a child process. */
export function runScript(file: string, args: string[], env: Record<string, string> = {}, timeoutMs = 20_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, file), ...args], {
      cwd: root, env: { ...process.env, WSM_LOG_LEVEL: 'silent', ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`${file} ${args.join(' ')} timed out`)); }, timeoutMs);
    child.on('close', (code) => { clearTimeout(timer); resolve({ code, stdout, stderr }); });
  });
}
