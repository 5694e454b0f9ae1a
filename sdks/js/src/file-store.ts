/**
 * The device store in a file (Node): by default `<user data dir>/ldpstream/device-store.json`
 * — `$XDG_DATA_HOME` or `~/.local/share` on Linux, `~/Library/Application Support` on
 * macOS, `%LOCALAPPDATA%` on Windows: the path the Python SDK's `platformdirs` gives.
 *
 * Updates are serialized by a lock file `<file>.lock-owner` created exclusively (`wx`),
 * holding the owner's pid, host and a random token; it is removed on release. A lock whose
 * owner process is gone (same host) or that is older than `staleMs` is broken. The file is
 * replaced atomically (write to a temporary file, fsync, rename), mode 0600 in a 0700
 * directory. This module is Node-only (the package's `browser` field maps it away).
 */
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, unlinkSync,
  writeSync, linkSync, statSync, chmodSync } from "node:fs";
import { homedir, hostname } from "node:os";
import { dirname, join } from "node:path";

import { StoreError } from "./errors.js";
import { randomUuid } from "./random.js";
import { DeviceStore, QUEUE_LIMIT, Serial, StoreDocument, parseDocument } from "./store.js";

/** `<user data dir>/ldpstream/device-store.json` (as Python's platformdirs). */
export function defaultStorePath(env: Record<string, string | undefined> = process.env,
                                 platform: string = process.platform): string {
  let base: string;
  if (platform === "win32") {
    base = env.LOCALAPPDATA ?? join(homedir(), "AppData", "Local");
  } else if (platform === "darwin") {
    base = join(homedir(), "Library", "Application Support");
  } else {
    const xdg = env.XDG_DATA_HOME?.trim();
    base = xdg ? xdg : join(homedir(), ".local", "share");
  }
  return join(base, "ldpstream", "device-store.json");
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const serials = new Map<string, Serial>();

interface Owner { pid: number; host: string; token: string; since: number }

export class FileStore implements DeviceStore {
  readonly path: string;
  private readonly lockPath: string;
  private readonly serial: Serial;

  /**
   * @param path the store file (default `defaultStorePath()`)
   * @param queueLimit largest number of queued reports
   * @param staleMs a lock held longer than this is taken for abandoned (default 30 s; an
   *   update holds it for milliseconds)
   */
  constructor(path?: string, readonly queueLimit: number = QUEUE_LIMIT,
              private readonly staleMs = 30_000) {
    this.path = path ?? defaultStorePath();
    this.lockPath = `${this.path}.lock-owner`;
    const s = serials.get(this.path) ?? new Serial();
    serials.set(this.path, s);
    this.serial = s;
  }

  update<T>(fn: (doc: StoreDocument) => T): Promise<T> {
    return this.serial.run(async () => {
      mkdirSync(dirname(this.path), { recursive: true, mode: 0o700 });
      const token = await this.lock();
      try {
        let text: string | null = null;
        try {
          text = readFileSync(this.path, "utf8");
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
        }
        const doc = parseDocument(text, this.path);
        const before = JSON.stringify(doc);
        const out = fn(doc);
        const after = JSON.stringify(doc);
        if (after !== before) this.write(after);
        return out;
      } finally {
        this.unlock(token);
      }
    });
  }

  private write(text: string): void {
    const tmp = `${this.path}.${randomUuid()}.tmp`;
    const fd = openSync(tmp, "wx", 0o600);
    try {
      writeSync(fd, text);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    chmodSync(tmp, 0o600);
    renameSync(tmp, this.path);
  }

  private async lock(): Promise<string> {
    const me: Owner = { pid: process.pid, host: hostname(), token: randomUuid(), since: Date.now() };
    for (let attempt = 0; ; attempt++) {
      try {
        const fd = openSync(this.lockPath, "wx", 0o600);
        try {
          writeSync(fd, JSON.stringify({ ...me, since: Date.now() }));
        } finally {
          closeSync(fd);
        }
        return me.token;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") {
          throw new StoreError(`cannot lock ${this.lockPath}: ${(e as Error).message}`);
        }
      }
      this.breakIfStale();
      await sleep(Math.min(50, 1 + attempt));
    }
  }

  private owner(path: string): Owner | null {
    try {
      return JSON.parse(readFileSync(path, "utf8")) as Owner;
    } catch {
      return null; // gone, or being written: not stale yet
    }
  }

  private breakIfStale(): void {
    let age: number;
    try {
      age = Date.now() - statSync(this.lockPath).mtimeMs;
    } catch {
      return;
    }
    const owner = this.owner(this.lockPath);
    let dead = false;
    if (owner && owner.host === hostname() && owner.pid !== process.pid) {
      try {
        process.kill(owner.pid, 0);
      } catch (e) {
        dead = (e as NodeJS.ErrnoException).code === "ESRCH";
      }
    }
    if (!dead && age < this.staleMs) return;
    // Move it aside, then check it was the lock we judged (not a fresh one taken meanwhile).
    const aside = `${this.lockPath}.${randomUuid()}.stale`;
    try {
      renameSync(this.lockPath, aside);
    } catch {
      return;
    }
    const moved = this.owner(aside);
    if (owner && moved && moved.token !== owner.token) {
      try {
        linkSync(aside, this.lockPath); // put the live owner's lock back
      } catch {
        // taken again meanwhile: the live owner's update still finishes first (it holds
        // the data it read); the race needs a dead owner and two breakers at once
      }
    }
    try {
      unlinkSync(aside);
    } catch {
      // already gone
    }
  }

  private unlock(token: string): void {
    const owner = this.owner(this.lockPath);
    if (owner && owner.token === token) {
      try {
        unlinkSync(this.lockPath);
      } catch {
        // broken by another process after staleMs: nothing to release
      }
    }
  }
}
