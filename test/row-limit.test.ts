import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createRegistry, defineExtension, defineTask, Harness, MemoryStorage, type Storage } from "../src/index.ts";
import type { SqliteDatabase } from "../src/storage/sqlite/database.ts";
import { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { openSqliteDatabase } from "../src/storage/sqlite/wasm.ts";
import { ctx, doneTask, openHarness } from "./support.ts";

// A whole row against the storage's row limit (issue 22 item 1): each value of a task's row is within
// settings.limits.maxBytes, but the row holds several (input, memos, checkpoint, outcome). A commit whose row
// would be larger than `Storage.maxRowBytes` (a Durable Object: 2 MB) is refused alone with InvalidInput
// (limit maxRowBytes), nothing written, not retried as a storage failure; the harness goes on.

const MAX_ROW = 4000;
const limits = { maxDepth: 16, maxBytes: 2000 };

/** sqlite-wasm in memory whose rows are limited as a Durable Object's are (the facade says so; SQLite does not). */
function rowLimited(db: SqliteDatabase, maxRowBytes: number): SqliteDatabase {
  return {
    exec: (sql) => db.exec(sql),
    run: (sql, ...params) => db.run(sql, ...params),
    get: (sql, ...params) => db.get(sql, ...params),
    all: (sql, ...params) => db.all(sql, ...params),
    transaction: (body) => db.transaction(body),
    ...(db.query
      ? {
          query: (
            sql: string,
            params: Parameters<NonNullable<SqliteDatabase["query"]>>[1],
            caps: Parameters<NonNullable<SqliteDatabase["query"]>>[2],
          ) => db.query!(sql, params, caps),
        }
      : {}),
    get readOnly() {
      return db.readOnly;
    },
    maxRowBytes,
    exportImage: () => db.exportImage(),
    close: () => db.close(),
  };
}

const rowLimitedBackends: Array<{ name: string; create(): Promise<Storage>; fromImage(bytes: Uint8Array): Promise<Storage> }> = [
  {
    name: "MemoryStorage",
    create: async () => new MemoryStorage({ maxRowBytes: MAX_ROW }),
    fromImage: async (bytes) => MemoryStorage.fromImage(bytes, { maxRowBytes: MAX_ROW }),
  },
  {
    name: "SQLite (sqlite-wasm, memory)",
    create: async () => SqliteStorage.open(rowLimited(await openSqliteDatabase({ vfs: "memory" }), MAX_ROW), "sqlite:row-limited"),
    fromImage: async (image) =>
      SqliteStorage.open(rowLimited(await openSqliteDatabase({ vfs: "memory", image }), MAX_ROW), "sqlite:row-limited"),
  },
];

/**
 * What a grower's phase met, by its token: the refusal of its memo's or its checkpoint's commit, and what was
 * committed when it came (the memo, the checkpoint's phase).
 */
const refusals = new Map<number, { error: unknown; memo: unknown; phase: unknown }>();
/** The memo and the checkpoint each grower commits, by the token in its input (the input holds only `pad`). */
const staged = new Map<number, { memo: string; checkpoint: string }>();
let tokens = 0;

/** Memoizes `memo`, then commits a checkpoint carrying `checkpoint`; a refused commit ends it "refused". */
const grower = defineTask<{ pad: string; token: number }, { phase: "grow" | "done"; carry?: string }, string>({
  name: "row.grower",
  version: 1,
  initial: () => ({ phase: "grow" }),
  phases: {
    grow: async (task, runtime, context) => {
      const { memo, checkpoint } = staged.get(task.input.token)!;
      try {
        await runtime.memo("m", memo, context);
        await runtime.commit(() => ({ status: "running", checkpoint: { phase: "done", carry: checkpoint } }), context);
      } catch (error) {
        const memoNow = await runtime.memo("m", context);
        await runtime.commit((_tx, current) => {
          refusals.set(task.input.token, {
            error,
            memo: memoNow,
            phase: "checkpoint" in current.state ? current.state.checkpoint.phase : undefined,
          });
          return { status: "terminal", outcome: { status: "completed", result: "refused" } };
        }, context);
      }
    },
    done: async (_task, runtime, context) =>
      runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "grown" } }), context),
  },
  abort: async () => {},
});
const done = doneTask("row.done");
const registry = () => createRegistry().install(defineExtension({ name: "row", tasks: [grower, done] }));

const bytes = (value: unknown) => new TextEncoder().encode(JSON.stringify(value)).length;

for (const backend of rowLimitedBackends) {
  describe(`a whole row against Storage.maxRowBytes on ${backend.name}`, () => {
    it("R9: a checkpoint that would make its task's row too large is InvalidInput (maxRowBytes); the row keeps what was committed; the harness goes on", async () => {
      const storage = await backend.create();
      const { harness } = await openHarness(storage, { registry: registry(), resume: true, settings: { limits } });
      const root = await harness.root(ctx);
      const pad = "é".repeat(900); // 1,802 bytes as JSON: each value is within maxBytes, three of them are not a row
      const token = ++tokens;
      staged.set(token, { memo: pad, checkpoint: pad });
      const id = await root.commit((tx) => tx.createTask(grower, { pad, token }), ctx);
      expect((await harness.waitForTask(id, ctx)).state).toMatchObject({ status: "terminal", outcome: { result: "refused" } });
      // The memo's commit was stored; the checkpoint's (the third copy of pad) never was.
      expect(refusals.get(token)).toEqual({
        error: expect.objectContaining({
          name: "InvalidInput",
          limit: "maxRowBytes",
          message: expect.stringMatching(/task row \d+ would be \d+ bytes, over the 4000 one row of this storage holds/),
        }),
        memo: pad,
        phase: "grow",
      });
      expect(bytes(await storage.getTask(id))).toBeLessThanOrEqual(MAX_ROW);
      const next = await root.commit((tx) => tx.createTask(done, 1), ctx);
      expect((await harness.waitForTask(next, ctx)).state).toMatchObject({ status: "terminal", outcome: { status: "completed" } });
      const copy = await Harness.open(
        await backend.fromImage(await storage.exportImage()),
        { registry: registry(), settings: { limits } },
        ctx,
      );
      await copy.inspect(ctx);
      await copy.close(ctx);
      await harness.close(ctx);
    });

    it("R9/S11 (property): a row within maxRowBytes is stored, one past it is refused with InvalidInput alone, nothing else; never a wedge, never a brick", async () => {
      // Any few characters (up to 4 bytes each), then 150 to 600 of 3 bytes: each value is within maxBytes (2,000),
      // the three may not be (their sum is spread from 1,350 to 5,600 bytes around the row's 4,000).
      const unit = fc.constantFrom("a", "é", "€", "😀", "\n", '"');
      const text = fc
        .tuple(fc.string({ unit, maxLength: 20 }), fc.integer({ min: 150, max: 600 }))
        .map(([head, n]) => head + "€".repeat(n));
      await fc.assert(
        fc.asyncProperty(text, text, text, async (pad, memo, checkpoint) => {
          const storage = await backend.create();
          const { harness } = await openHarness(storage, { registry: registry(), resume: true, settings: { limits } });
          const root = await harness.root(ctx);
          const token = ++tokens;
          staged.set(token, { memo, checkpoint });
          const id = await root.commit((tx) => tx.createTask(grower, { pad, token }), ctx);
          const ended = (await harness.waitForTask(id, ctx)).state;
          const refusal = refusals.get(token);
          const parts = bytes(pad) + bytes(memo) + bytes(checkpoint);
          if (refusal === undefined) {
            expect(ended).toMatchObject({ status: "terminal", outcome: { status: "completed", result: "grown" } });
            expect(parts).toBeLessThanOrEqual(MAX_ROW); // the row held all three at once
          } else {
            expect(refusal.error).toMatchObject({ name: "InvalidInput", limit: "maxRowBytes" });
            expect(refusal.phase).toBe("grow"); // nothing of the refused commit: not its checkpoint, nor its memo
            if (refusal.memo !== undefined) expect(refusal.memo).toBe(memo);
            expect(parts + 1000).toBeGreaterThan(MAX_ROW); // far below the limit nothing is refused
            expect(ended).toMatchObject({ status: "terminal", outcome: { status: "completed", result: "refused" } });
          }
          expect(bytes(await storage.getTask(id))).toBeLessThanOrEqual(MAX_ROW);
          const next = await root.commit((tx) => tx.createTask(done, 1), ctx);
          expect((await harness.waitForTask(next, ctx)).state).toMatchObject({ status: "terminal", outcome: { status: "completed" } });
          const copy = await Harness.open(
            await backend.fromImage(await storage.exportImage()),
            { registry: registry(), settings: { limits } },
            ctx,
          );
          await copy.inspect(ctx);
          await copy.close(ctx);
          await harness.close(ctx);
        }),
        { numRuns: backend.name === "MemoryStorage" ? 100 : 40 },
      );
    }, 120_000);
  });
}

// The fenced log's tail keeps a transaction in slices under the row limit (decision 0039; before, in one row, so
// a transaction whose tail row passed the limit was refused: a takeover of 10,000 running tasks on a Durable Object
// could not be stored). Only a row of its own can be too large now.
describe("the log's tail against the row limit (issue 27, decision 0039)", () => {
  for (const backend of rowLimitedBackends) {
    it(`${backend.name}: a fenced transaction larger than maxRowBytes, each of its rows within it, is stored and its tail read back whole`, async () => {
      const storage = await backend.create();
      const empty = { tasks: [], conversations: [], entries: [], submissions: [] };
      await storage.apply({ ...empty, fence: { epoch: 1, position: 1 }, documents: [{ scope: "s", key: "a", value: "x".repeat(1_500) }] });
      // Each document row is within the limit; the transaction is not.
      const large = ["b", "c", "d"].map((key) => ({ scope: "s", key, value: "x".repeat(1_500) }));
      await storage.apply({ ...empty, fence: { epoch: 1, position: 2 }, documents: large });
      const state = await storage.load();
      expect(state.log).toEqual({ epoch: 1, position: 2 });
      expect(state.documents.map((document) => document.key)).toEqual(["a", "b", "c", "d"]);
      const tail = await storage.readLog!(0, 10);
      expect(tail.map((batch) => batch.fence.position)).toEqual([1, 2]);
      expect(tail[1]!.documents).toEqual(large);
    });
  }
});
