import { describe, expect, it } from "vitest";
import { createRegistry, DatabaseCorrupt, defineExtension, defineTask, Harness } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import type { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { FULL_CHECK_BYTES } from "../src/storage/sqlite/wasm/open.ts";
import { ctx } from "./support.ts";

const idle = defineTask<null, { phase: "idle" }, null>({
  name: "test.idle",
  version: 1,
  initial: () => ({ phase: "idle" }),
  phases: { idle: async (_task, runtime, context) => runtime.sleepUntil(runtime.now() + 3_600_000, { phase: "idle" }, context) },
  abort: async () => {},
});
const registry = () => createRegistry().install(defineExtension({ name: "t", tasks: [idle] }));

/**
 * A database past FULL_CHECK_BYTES: one live task, and finished tasks written straight into the table (as a
 * long history leaves them), with ids after the live one.
 */
async function largeImage(): Promise<{ image: Uint8Array; liveId: number; finished: number[]; pageSize: number }> {
  const storage: SqliteStorage = await openSqliteStorage({ vfs: "memory" });
  const harness = await Harness.open(storage, { registry: registry() }, ctx);
  const root = await harness.root(ctx);
  const liveId = await root.commit((tx) => tx.createTask(idle, null), ctx);
  await harness.close(ctx);
  const first = liveId + 1;
  const count = 12_000;
  const padding = "x".repeat(400);
  await storage.database.transaction((tx) => {
    for (let id = first; id < first + count; id++) {
      const record = { id, conversationId: root.id, kind: "test.idle", version: 1, input: null, background: false, abortRequested: false };
      const state = { status: "terminal", outcome: { status: "completed", result: padding } };
      tx.run(
        "INSERT INTO tasks (id, conversation_id, kind, status, record) VALUES (?, ?, ?, 'terminal', ?)",
        id,
        root.id,
        "test.idle",
        JSON.stringify({ ...record, state }),
      );
    }
  });
  const pageSize = Number((await storage.database.get("PRAGMA page_size"))?.page_size);
  const image = await storage.exportImage();
  await storage.close();
  expect(image.byteLength).toBeGreaterThan(FULL_CHECK_BYTES);
  return { image, liveId, finished: [first, first + count - 1], pageSize };
}

/** The page of `table`'s root (a leaf, for a small table). */
async function rootPage(image: Uint8Array, table: string): Promise<number> {
  const storage = await openSqliteStorage({ vfs: "memory", image, readOnly: true });
  const row = await storage.database.get("SELECT rootpage FROM sqlite_schema WHERE name = ?", table);
  await storage.close();
  return Number(row?.rootpage);
}

/**
 * A leaf of the tasks table's b-tree, read from its interior root page: the first (the live task's, the
 * table's first row) or one in the middle (finished rows only).
 */
async function tasksLeaf(image: Uint8Array, pageSize: number, which: "first" | "middle"): Promise<number> {
  const root = await rootPage(image, "tasks");
  const page = new DataView(image.buffer, image.byteOffset + (root - 1) * pageSize, pageSize);
  expect(page.getUint8(0)).toBe(0x05); // an interior table page: 12-byte header, then the cell pointers
  const cells = page.getUint16(3);
  const cell = which === "first" ? 0 : Math.floor(cells / 2);
  return page.getUint32(page.getUint16(12 + 2 * cell)); // a cell starts with its left child's page number
}

function damagePage(image: Uint8Array, page: number, pageSize: number): Uint8Array {
  const copy = image.slice();
  copy.fill(0x01, (page - 1) * pageSize, page * pageSize); // no page type is 0x01: SQLite refuses the page when it reads it
  return copy;
}

describe("decision 0027: the open checks what it reads, not the whole file", () => {
  it("B4: a large database whose documents table is damaged is refused before anything is written", async () => {
    const { image, pageSize } = await largeImage();
    const damaged = damagePage(image, await rootPage(image, "documents"), pageSize);
    const error = await openSqliteStorage({ vfs: "memory", image: damaged }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DatabaseCorrupt);
    expect(String(error)).toMatch(/damaged|integrity check/);
  });

  it("B4: a large database whose live task's page is damaged is refused when the open reads it, before a write", async () => {
    const { image, pageSize } = await largeImage();
    const damaged = damagePage(image, await tasksLeaf(image, pageSize, "first"), pageSize);
    const opened = await openSqliteStorage({ vfs: "memory", image: damaged })
      .then((s) => Harness.open(s, { registry: registry() }, ctx))
      .catch((e: unknown) => e);
    expect(opened).toBeInstanceOf(DatabaseCorrupt);
  });

  it("B4: damage among finished rows the open never reads does not cost the open; reading such a row gives DatabaseCorrupt", async () => {
    const { image, finished, pageSize } = await largeImage();
    const damaged = damagePage(image, await tasksLeaf(image, pageSize, "middle"), pageSize);
    const storage = await openSqliteStorage({ vfs: "memory", image: damaged });
    const harness = await Harness.open(storage, { registry: registry() }, ctx);
    expect((await harness.inspect(ctx)).tasks).toHaveLength(1);
    const reads = await Promise.allSettled(
      Array.from({ length: finished[1]! - finished[0]! + 1 }, (_, index) => storage.getTask(finished[0]! + index)),
    );
    expect(reads.some((read) => read.status === "rejected" && read.reason instanceof DatabaseCorrupt)).toBe(true);
    await harness.close(ctx).catch(() => {});
  });

  it("a small database is still checked whole: damage among finished rows is refused at open", async () => {
    const storage: SqliteStorage = await openSqliteStorage({ vfs: "memory" });
    const harness = await Harness.open(storage, { registry: registry() }, ctx);
    const root = await harness.root(ctx);
    await harness.close(ctx);
    await storage.database.transaction((tx) => {
      for (let id = 100; id < 2_100; id++)
        tx.run(
          "INSERT INTO tasks (id, conversation_id, kind, status, record) VALUES (?, ?, 'test.idle', 'terminal', ?)",
          id,
          root.id,
          JSON.stringify({ id, state: { status: "terminal", outcome: { status: "completed", result: "y".repeat(200) } } }),
        );
    });
    const pageSize = Number((await storage.database.get("PRAGMA page_size"))?.page_size);
    const image = await storage.exportImage();
    expect(image.byteLength).toBeLessThan(FULL_CHECK_BYTES);
    const damaged = damagePage(image, Math.floor(image.byteLength / pageSize / 2), pageSize);
    await expect(openSqliteStorage({ vfs: "memory", image: damaged })).rejects.toThrow(DatabaseCorrupt);
  });
});
