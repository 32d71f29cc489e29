/// <reference lib="webworker" />
import * as Comlink from "comlink";
import type { SqliteDatabase } from "../../src/storage/sqlite/database.ts";
import { openSqliteStorage } from "../../src/storage/sqlite/open-storage.ts";
import { installSahPool, openSqliteDatabase } from "../../src/storage/sqlite/wasm";
import type { Storage } from "../../src/storage/storage.ts";
import { storageConformance } from "../../src/testing/storage-conformance.ts";
import type { OpenOptions, WorkerApi } from "./api.ts";

// Test worker for e2e/sqlite-opfs.e2e.ts: the sahpool adapter under test, plus raw pool access.

let db: SqliteDatabase | undefined;
let written = 0;
let release: (() => void) | undefined;

function database(): SqliteDatabase {
  if (!db) throw new Error("open() first");
  return db;
}

const api: WorkerApi = {
  holdCheckpoints() {
    release = database().holdCheckpoints?.();
  },
  releaseCheckpoints() {
    release?.();
  },
  async walFrames() {
    return Number((await database().get("PRAGMA wal_checkpoint(PASSIVE)"))?.log);
  },
  async conformance() {
    let file = 0;
    const opened: Storage[] = [];
    const backend = {
      async create() {
        const storage = await openSqliteStorage({ vfs: "opfs-sahpool", path: `/conformance-${++file}.sqlite3` });
        opened.push(storage);
        return storage;
      },
      async fromImage(image: Uint8Array, options?: { readOnly?: boolean }) {
        return openSqliteStorage({ vfs: "memory", image, readOnly: options?.readOnly });
      },
    };
    const results: Array<{ name: string; error?: string }> = [];
    for (const test of storageConformance(backend)) {
      try {
        await test.run();
        results.push({ name: test.name });
      } catch (error) {
        results.push({ name: test.name, error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) });
      }
      while (opened.length > 0) await opened.pop()!.close();
    }
    return results;
  },
  async readOnlyBehindLog(path, steps) {
    const task = (n: number) => ({
      id: 1,
      conversationId: 1,
      kind: "k",
      version: 1,
      input: null,
      background: false,
      abortRequested: false,
      state: { status: "running" as const, checkpoint: { phase: "step", n } },
    });
    const batch = (n: number) => ({
      fence: { epoch: 1, position: n + 1 },
      tasks: [task(n)],
      conversations: [],
      entries: [],
      submissions: [],
      documents: [],
    });
    const writer = await openSqliteStorage({ vfs: "opfs-sahpool", path });
    await writer.load();
    for (let n = 0; n <= steps; n++) await writer.apply(batch(n));
    await writer.database.close(); // not the storage's close: what waited is not written (a crash leaves the file so)
    // The pool is paused when its last connection closes: asked again each time (as poolFileDigest does).
    const before = (await digest((await installSahPool()).exportFile(path))).sha256;
    const reader = await openSqliteStorage({ vfs: "opfs-sahpool", path, readOnly: true });
    const seen = (await reader.query("SELECT id, record ->> '$.state.checkpoint.n' AS n FROM tasks")) as Array<{ id: number; n: number }>;
    const mark = await reader.query("SELECT value FROM pi_durable_meta WHERE key = 'tasks_behind_log'");
    await reader.close();
    const after = (await digest((await installSahPool()).exportFile(path))).sha256;
    return { mark: (mark[0]?.value as string | undefined) ?? null, seen, before, after };
  },
  async open(options: OpenOptions = {}) {
    const started = performance.now();
    db = await openSqliteDatabase({ vfs: "opfs-sahpool", ...options });
    const openMs = performance.now() - started;
    if (!options.readOnly) await db.exec("CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, v TEXT NOT NULL)");
    const journal = await db.get("PRAGMA journal_mode");
    const locking = await db.get("PRAGMA locking_mode");
    return { openMs, journalMode: String(journal?.journal_mode), lockingMode: String(locking?.locking_mode) };
  },
  async insert(count, payloadBytes = 16) {
    const payload = "x".repeat(payloadBytes);
    let last = 0;
    for (let index = 0; index < count; index += 1) {
      last = await database().transaction((tx) => {
        tx.run("INSERT INTO rows (v) VALUES (?)", payload);
        return Number(tx.get("SELECT last_insert_rowid() AS id")?.id);
      });
    }
    return last;
  },
  startWriting() {
    const writeOne = async (): Promise<void> => {
      await database().transaction((tx) => tx.run("INSERT INTO rows (v) VALUES ('loop')"));
      written += 1;
      setTimeout(() => void writeOne(), 0);
    };
    void writeOne();
  },
  written: () => written,
  async stats() {
    const row = await database().get(
      "SELECT count(*) AS count, min(id) AS minId, max(id) AS maxId, sum(v LIKE 'uncommitted%') AS uncommitted FROM rows",
    );
    return {
      count: Number(row?.count),
      minId: (row?.minId ?? null) as number | null,
      maxId: (row?.maxId ?? null) as number | null,
      uncommitted: Number(row?.uncommitted ?? 0),
    };
  },
  async integrityCheck() {
    return (await database().all("PRAGMA integrity_check")).map((row) => String(row.integrity_check));
  },
  async holdOpenTransaction(extraRows) {
    const db = database();
    await db.exec("PRAGMA cache_size = 2");
    await db.exec("BEGIN");
    await db.run("UPDATE rows SET v = 'uncommitted ' || v");
    for (let index = 0; index < extraRows; index += 1) await db.run("INSERT INTO rows (v) VALUES ('uncommitted new')");
  },
  async exportAndCount() {
    const image = await database().exportImage();
    const copy = await openSqliteDatabase({ vfs: "memory", image, readOnly: true });
    try {
      const row = await copy.get("SELECT count(*) AS n FROM rows");
      return { bytes: image.byteLength, count: Number(row?.n), header: new TextDecoder().decode(image.subarray(0, 15)) };
    } finally {
      await copy.close();
    }
  },
  async close() {
    await db?.close();
    db = undefined;
  },
  async poolFiles() {
    return (await installSahPool()).getFileNames();
  },
  async poolFileDigest(path) {
    return digest((await installSahPool()).exportFile(path));
  },
  async damage(path) {
    const pool = await installSahPool();
    const bytes = pool.exportFile(path);
    if (bytes.byteLength < 3 * 4096) throw new Error(`the database is too small to damage meaningfully (${bytes.byteLength} bytes)`);
    for (let index = 100; index < 2 * 4096; index += 1) bytes[index] = (index * 31 + 7) & 0xff;
    pool.importDb(path, bytes);
    return digest(pool.exportFile(path));
  },
};

// Exposed synchronously, before anything awaits: messages that arrive before expose() are lost.
Comlink.expose(api);

async function digest(bytes: Uint8Array): Promise<{ size: number; sha256: string }> {
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", new Uint8Array(bytes)));
  return { size: bytes.byteLength, sha256: Array.from(hash, (byte) => byte.toString(16).padStart(2, "0")).join("") };
}
