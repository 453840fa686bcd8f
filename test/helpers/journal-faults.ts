import { nodeJournalFileOps, type JournalFileOps } from '../../src/store/journal.js';

/** An error as Node's fs gives it for a full disk. */
export function enospc(syscall: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`ENOSPC: no space left on device, ${syscall}`), { code: 'ENOSPC', errno: -28, syscall });
}

/**
 * Journal file operations that fail on demand as a full disk does: the real
 * operations (`nodeJournalFileOps`) until `fail` is set, then ENOSPC from
 * `write` (after writing `partialBytes` of the first refused write, as a
 * disk that fills up part-way does) or from `datasync`.
 */
export class JournalFaults {
  /** Which operation fails while set; `undefined`: none. */
  fail: 'write' | 'datasync' | undefined;
  /** Bytes the first failing write still writes before it fails (a partly written record). */
  partialBytes = 0;
  /** How many operations failed so far. */
  failed = 0;
  private partialDone = false;

  readonly ops: Partial<JournalFileOps> = {
    write: async (handle, bytes, offset, length) => {
      if (this.fail !== 'write') return nodeJournalFileOps.write(handle, bytes, offset, length);
      if (this.partialBytes > 0 && !this.partialDone && length > this.partialBytes) {
        this.partialDone = true;
        return nodeJournalFileOps.write(handle, bytes, offset, this.partialBytes);
      }
      this.failed++;
      throw enospc('write');
    },
    datasync: async (handle) => {
      if (this.fail !== 'datasync') return nodeJournalFileOps.datasync(handle);
      this.failed++;
      throw enospc('fdatasync');
    },
  };

  /** Starts failing `op`. */
  start(op: 'write' | 'datasync', partialBytes = 0): void {
    this.fail = op;
    this.partialBytes = partialBytes;
    this.partialDone = false;
  }

  /** The disk has room again. */
  clear(): void {
    this.fail = undefined;
  }
}
