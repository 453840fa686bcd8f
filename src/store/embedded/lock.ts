import { open, readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** File name of the lock inside a data directory. */
export const LOCK_FILE = 'lock';

/** A held data-directory lock. */
export interface DirLock {
  readonly path: string;
  /** Removes the lock file (only if it still names this process). Idempotent. */
  release(): Promise<void>;
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

async function readPid(path: string): Promise<number | undefined> {
  // A lock file is created empty and the pid written right after: give a
  // process that is in between a moment before calling the file garbage.
  for (let attempt = 0; attempt < 5; attempt++) {
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
    const pid = Number.parseInt(text.trim(), 10);
    if (Number.isInteger(pid) && pid > 0) return pid;
    await sleep(20);
  }
  return undefined;
}

async function create(path: string): Promise<boolean> {
  let handle;
  try {
    handle = await open(path, 'wx');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
  try {
    await handle.writeFile(`${process.pid}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  return true;
}

/**
 * Takes the lock of a data directory: creates `<dir>/lock` holding this
 * process's pid with O_EXCL. If the lock exists and names a process that no
 * longer runs, it is taken over (reported through `onInfo`); otherwise this
 * throws an Error saying which process uses the directory. The same process
 * opening a directory twice is refused as well, unless `ownLockIsStale`
 * says the lock it holds belonged to a store thread of its own that stopped
 * (`ThreadedStore` restarting it).
 *
 * Limitation: two processes taking over the same stale lock at the same
 * instant can both succeed.
 */
export async function acquireLock(dir: string, onInfo: (message: string) => void = () => {}, options: { ownLockIsStale?: boolean } = {}): Promise<DirLock> {
  const path = join(dir, LOCK_FILE);
  for (let attempt = 0; attempt < 3; attempt++) {
    if (await create(path)) return makeLock(path);
    const pid = await readPid(path);
    const own = pid === process.pid && options.ownLockIsStale === true;
    if (own) onInfo(`taking over ${path} from this process's store thread that stopped`);
    else if (pid !== undefined && isRunning(pid)) {
      throw new Error(
        `Data directory ${dir} is in use: another process (pid ${pid}) is using the data directory. ` +
          `Stop it first, or remove ${path} if you are sure no process uses the directory.`,
      );
    }
    else onInfo(`taking over stale lock ${path} (${pid === undefined ? 'no readable pid' : `pid ${pid} no longer runs`})`);
    await unlink(path).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
  }
  throw new Error(`Could not take the lock ${path}: other processes keep taking it`);
}

function makeLock(path: string): DirLock {
  let released = false;
  return {
    path,
    async release() {
      if (released) return;
      released = true;
      if ((await readPid(path)) === process.pid) await unlink(path).catch(() => {});
    },
  };
}
