import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SchemaTooNew, StaleEpoch, TasksBehindLog } from "../src/errors.ts";
import type { Batch, TaskRecord } from "../src/storage/records.ts";
import type { SqliteDatabase, SqliteTransaction } from "../src/storage/sqlite/database.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { SCHEMA_VERSION, TASKS_BEHIND_LOG } from "../src/storage/sqlite/schema.ts";
import { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { openSqliteDatabase } from "../src/storage/sqlite/wasm.ts";
import { SEED_QUERY } from "./deferred-support.ts";
import { stepped } from "./sqlite-support.ts";
import { taskRecord } from "./task-record.ts";
import { watchTransactions } from "./watched-db.ts";

// Decision 0081 (issue 27, decision 0076's Step 2): a fenced step of live tasks whose status stays writes its log row
// only; the task rows wait in memory, a metadata mark says the table is behind the log, a writable open replays the
// log past it (a read-only open reads through it in memory, decision 0088). S4: an acknowledged step is never lost; S11: the seed's query sees it.

/** Counts the rows written by statements inside transactions. */
function counting(db: SqliteDatabase) {
  const seen = { rows: 0 };
  const database = watchTransactions(db, { run: (_sql, changed) => void (seen.rows += changed) });
  return { database, seen };
}

const both = (tasks: TaskRecord[], position: number | undefined): Batch => ({
  ...(position === undefined ? {} : { fence: { epoch: 1, position } }),
  tasks,
  conversations: [],
  entries: [],
  submissions: [],
  documents: [],
});
const running = (id: number, n: number) => taskRecord(id, { status: "running", checkpoint: { phase: "step", n } });

/** Two tasks created at position 1, then `steps` fenced steps alternating between them (positions 2…). */
async function stepping(storage: SqliteStorage, steps: number): Promise<number> {
  await storage.load();
  await storage.apply(both([running(1, 0), running(2, 0)], 1));
  for (let step = 1; step <= steps; step++) await storage.apply(both([running(1 + (step % 2), step)], step + 1));
  return steps + 1;
}

async function deferring(flushEvery?: number): Promise<SqliteStorage> {
  return openSqliteStorage({ vfs: "memory", deferTaskRows: flushEvery === undefined ? true : { flushEvery } });
}

const mark = async (image: Uint8Array) => {
  const db = await openSqliteDatabase({ vfs: "memory", image, readOnly: true });
  const row = await db.get("SELECT value FROM pi_durable_meta WHERE key = ?", TASKS_BEHIND_LOG);
  await db.close();
  return row?.value;
};

describe("a fenced effect-free step writes its log row only (decision 0081)", () => {
  it("0081/0086/S11: 255 fenced steps of a running task write 256 rows (their log rows and the mark once), not 510; the mark stays after the 256th writes what waited", async () => {
    const db = await openSqliteDatabase({ vfs: "memory" });
    const { database, seen } = counting(db);
    const storage = await SqliteStorage.open(database, "deferring", { deferTaskRows: true });
    await storage.load();
    await storage.apply(stepped(1, 0, 1, 1)); // the task's creation: its row is written
    seen.rows = 0;
    for (let n = 1; n <= 255; n++) await storage.apply(stepped(1, n, n + 1, 1));
    expect(seen.rows).toBe(256); // decision 0081 wrote 284: the mark 8 times, and 7 flushes of 3 rows more (task, mark, own row)
    await storage.apply(stepped(1, 256, 257, 1)); // the 256th writes what waited and its own row; the mark stays
    expect(seen.rows).toBe(256 + 3);
    await storage.apply(stepped(1, 257, 258, 1)); // waits again: its log row alone (0081 wrote the mark again)
    expect(seen.rows).toBe(259 + 1);
    expect(await storage.getTask(1)).toMatchObject({ state: { checkpoint: { n: 257 } } }); // the read writes it, the mark stays
    expect(seen.rows).toBe(260 + 1);
    expect((await storage.query(SEED_QUERY))[0]).toMatchObject({ id: 1, n: 257 });
    expect(await mark(await db.exportImage())).toBe("1"); // the disk: the table complete through 1 (the creation), the log past it
    expect(await mark(await storage.exportImage())).toBeUndefined(); // a copy: complete, no mark, opens read-only
    await db.close();
  });

  it("0081/S4/S11: a crash after k deferring commits, then a writable open: every task as last acknowledged, the seed's query unchanged (read-only too, decision 0088)", async () => {
    for (const k of [1, 2, 30, 31, 32, 33, 64, 65]) {
      const storage = await deferring();
      const reference = await openSqliteStorage({ vfs: "memory", deferTaskRows: false });
      await stepping(storage, k);
      await stepping(reference, k);
      const image = await storage.database.exportImage(); // the disk at the crash: what waited in memory is gone
      // Read-only, the same rows through the log (decision 0088: test/read-only-overlay.test.ts), nothing written.
      const readOnly = await openSqliteStorage({ vfs: "memory", image, readOnly: true });
      const expected = await reference.query(SEED_QUERY);
      expect(await readOnly.query(SEED_QUERY), `k = ${k}`).toEqual(expected);
      await readOnly.close();
      const reopened = await openSqliteStorage({ vfs: "memory", image });
      expect(await reopened.query(SEED_QUERY), `k = ${k}`).toEqual(expected);
      expect((await reopened.load()).liveTasks).toEqual((await reference.load()).liveTasks);
      expect(await mark(await reopened.database.exportImage())).toBeUndefined();
      // And read-only after that one writable open.
      const viewer = await openSqliteStorage({ vfs: "memory", image: await reopened.exportImage(), readOnly: true });
      expect(await viewer.query(SEED_QUERY)).toEqual(expected);
      for (const each of [storage, reference, reopened, viewer]) await each.close();
    }
    // Most of those crashes left rows waiting (the test must see the replay, not only the happy path).
    const storage = await deferring();
    await stepping(storage, 5);
    expect(await mark(await storage.database.exportImage())).toBe("1");
  });

  it("0081/S4: a trim after deferring commits writes what waited first (the rows it deletes held it)", async () => {
    const storage = await deferring();
    const head = await stepping(storage, 6);
    await storage.trimLog(head);
    const reopened = await openSqliteStorage({ vfs: "memory", image: await storage.database.exportImage() });
    expect(await reopened.query("SELECT id, record ->> '$.state.checkpoint.n' AS n FROM tasks ORDER BY id")).toEqual([
      { id: 1, n: 6 },
      { id: 2, n: 5 },
    ]);
    expect(await reopened.readLog(0, 10)).toEqual([]);
  });

  it("0081/S4: a commit without a lease after deferring commits writes what waited in its own transaction and deletes the mark", async () => {
    const storage = await deferring();
    await stepping(storage, 4);
    await storage.apply(both([running(2, 100)], undefined));
    const image = await storage.database.exportImage();
    expect(await mark(image)).toBeUndefined();
    const reopened = await openSqliteStorage({ vfs: "memory", image, readOnly: true });
    expect(await reopened.query("SELECT id, record ->> '$.state.checkpoint.n' AS n FROM tasks ORDER BY id")).toEqual([
      { id: 1, n: 4 },
      { id: 2, n: 100 },
    ]);
  });

  it("0081/S4: a rebuild after deferring commits replaces what waited (no old row is written over the snapshot's)", async () => {
    const storage = await deferring();
    await stepping(storage, 5);
    const source = await openSqliteStorage({ vfs: "memory" });
    await stepping(source, 2);
    const snapshot = (await source.readSnapshot())!;
    await storage.rebuild(snapshot);
    const expected = await source.query(SEED_QUERY);
    expect(await mark(await storage.database.exportImage())).toBeUndefined();
    expect(await storage.query(SEED_QUERY)).toEqual(expected);
    await storage.close();
    // It follows on from the snapshot's head, deferring again.
    const again = await deferring();
    await again.rebuild(snapshot);
    await again.load();
    await again.apply(both([running(1, 40)], 4));
    const reopened = await openSqliteStorage({ vfs: "memory", image: await again.database.exportImage() });
    expect(await reopened.getTask(1)).toMatchObject({ state: { checkpoint: { n: 40 } } });
  });

  it("0081/S4: a storage that defers sees another storage's newer epoch on the connection and does not write its waiting rows over it", async () => {
    const db = await openSqliteDatabase({ vfs: "memory" });
    const writer = await SqliteStorage.open(db, "writer", { deferTaskRows: true });
    const other = await SqliteStorage.open(db, "other", { deferTaskRows: true });
    await stepping(writer, 4); // task 1 at 4 and task 2 at 3 wait in the writer's memory
    await other.load();
    await other.apply({ ...both([running(1, 99)], 6), fence: { epoch: 2, position: 6 } });
    await expect(writer.apply(both([running(1, 5)], 6))).rejects.toThrow(StaleEpoch);
    expect(await writer.getTask(1)).toMatchObject({ state: { checkpoint: { n: 99 } } });
    expect(await writer.getTask(2)).toMatchObject({ state: { checkpoint: { n: 3 } } });
    await db.close();
  });
});

describe("0091: a lease-less commit while nothing waits runs with no turn", () => {
  it("0091/S4: after another storage on the connection left rows behind the log (its mark), a lease-less commit of a storage that kept none replays them first: the file has no mark, and a writable reopen keeps the commit's row", async () => {
    const db = await openSqliteDatabase({ vfs: "memory" });
    const plain = await SqliteStorage.open(db, "plain", { deferTaskRows: true });
    await plain.load();
    // Lease-less commits: nothing waits and this storage keeps no mark (the path with no turn).
    await plain.apply(both([running(1, 0), running(2, 0)], undefined));
    await plain.apply(both([running(2, 1)], undefined));
    // Another storage's fenced steps: its rows wait, its mark is in the file, its log rows hold them.
    const other = await SqliteStorage.open(db, "other", { deferTaskRows: true });
    await other.load();
    for (let n = 1; n <= 3; n++) await other.apply(both([running(1, 10 + n)], n));
    expect(await mark(await db.exportImage())).toBeDefined();
    // The plain storage's next lease-less commit: the file's write count moved, so it takes a whole turn.
    await plain.apply(both([running(2, 50)], undefined));
    await plain.apply(both([running(2, 51)], undefined));
    const image = await db.exportImage();
    expect(await mark(image)).toBeUndefined();
    const rows = "SELECT id, record ->> '$.state.checkpoint.n' AS n FROM tasks ORDER BY id";
    expect(await plain.query(rows)).toEqual([
      { id: 1, n: 13 },
      { id: 2, n: 51 },
    ]);
    const reopened = await openSqliteStorage({ vfs: "memory", image });
    expect(await reopened.query(rows)).toEqual([
      { id: 1, n: 13 },
      { id: 2, n: 51 },
    ]);
    await db.close();
  });
});

describe("0081: schema version 6", () => {
  it("0120/S4: a deferring step whose commit fails after its body leaves what waited as it was: the task reads as last acknowledged, then as the retried step", async () => {
    const inner = await openSqliteDatabase({ vfs: "memory" });
    let failCommit = false;
    // The body runs in the database's transaction, then the COMMIT fails (a full disk, say): SQLite rolls it back.
    const db = new Proxy(inner, {
      get(target, key) {
        if (key === "transaction")
          return <T>(body: (tx: SqliteTransaction) => T) =>
            target.transaction((tx) => {
              const result = body(tx);
              if (failCommit) throw new Error("disk I/O error at COMMIT");
              return result;
            });
        const value = Reflect.get(target, key, target) as unknown;
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const storage = await SqliteStorage.open(db, "sqlite", { deferTaskRows: true });
    await storage.load();
    await storage.apply(both([running(1, 0)], 1));
    await storage.apply(both([running(1, 1)], 2)); // waits
    failCommit = true;
    await expect(storage.apply(both([running(1, 2)], 3))).rejects.toThrow("disk I/O error at COMMIT");
    failCommit = false;
    expect((await storage.getTask(1))?.state).toEqual(running(1, 1).state);
    await storage.apply(both([running(1, 2)], 3)); // the same step again, at the same position
    await storage.apply(both([running(1, 3)], 4));
    expect((await storage.getTask(1))?.state).toEqual(running(1, 3).state);
    expect((await storage.readLog(0, 10)).map((batch) => batch.fence.position)).toEqual([1, 2, 3, 4]);
    await storage.close();
  });

  it("S11: a version 5 file opens writable and is migrated by its number; one newer than 6 is refused, unmodified", async () => {
    expect(SCHEMA_VERSION).toBe(6);
    const storage = await openSqliteStorage({ vfs: "memory" });
    await stepping(storage, 2);
    await storage.database.run("UPDATE pi_durable_meta SET value = '5' WHERE key = 'schema_version'");
    const five = await storage.exportImage();
    const viewer = await openSqliteStorage({ vfs: "memory", image: five, readOnly: true });
    expect(await viewer.query(SEED_QUERY)).toEqual(await storage.query(SEED_QUERY));
    const migrated = await openSqliteStorage({ vfs: "memory", image: five, deferTaskRows: true });
    expect(await migrated.database.get("SELECT value FROM pi_durable_meta WHERE key = 'schema_version'")).toEqual({ value: "6" });
    await migrated.database.run("UPDATE pi_durable_meta SET value = '7' WHERE key = 'schema_version'");
    const seven = await migrated.database.exportImage();
    await expect(openSqliteStorage({ vfs: "memory", image: seven })).rejects.toBeInstanceOf(SchemaTooNew);
    await expect(openSqliteStorage({ vfs: "memory", image: seven, readOnly: true })).rejects.toBeInstanceOf(SchemaTooNew);
  });
});

type Op =
  | { kind: "step"; task: number }
  | { kind: "status"; task: number }
  | { kind: "end"; task: number }
  | { kind: "create" }
  | { kind: "plain"; task: number }
  | { kind: "trim"; back: number }
  | { kind: "read" }
  | { kind: "copy" }
  | { kind: "crash" };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant("step" as const), task: fc.nat(3) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("status" as const), task: fc.nat(3) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("end" as const), task: fc.nat(3) }) },
  { weight: 1, arbitrary: fc.constant({ kind: "create" as const }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("plain" as const), task: fc.nat(3) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("trim" as const), back: fc.nat(4) }) },
  { weight: 1, arbitrary: fc.constant({ kind: "read" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "copy" as const }) },
  { weight: 3, arbitrary: fc.constant({ kind: "crash" as const }) },
);

describe("0081: the deferring storage against the same sequence without it (fast-check)", () => {
  it("S4/S11: random fenced steps, status changes, ends, lease-less commits, trims, reads, copies and crashes (opened read-only too) leave the same rows and the same seed's query", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 6 }), fc.array(op, { minLength: 1, maxLength: 30 }), async (flushEvery, ops) => {
        let defers = await deferring(flushEvery);
        let plain = await openSqliteStorage({ vfs: "memory", deferTaskRows: false });
        await defers.load();
        await plain.load();
        const tasks = new Map<number, { status: "running" | "pending"; n: number }>();
        let head = 0;
        let nextId = 1;
        const apply = async (batch: Batch) => {
          await defers.apply(batch);
          await plain.apply(batch);
        };
        const record = (id: number) => {
          const task = tasks.get(id)!;
          return taskRecord(id, { status: task.status, checkpoint: { phase: "step", n: task.n } });
        };
        const live = (index: number) => [...tasks.keys()][index % Math.max(1, tasks.size)];
        const same = async () => {
          expect(await defers.query(SEED_QUERY)).toEqual(await plain.query(SEED_QUERY));
        };
        for (const next of ops) {
          if (next.kind === "create" || tasks.size === 0) {
            tasks.set(nextId, { status: "running", n: 0 });
            await apply(both([record(nextId++)], ++head));
          } else if (next.kind === "step" || next.kind === "status" || next.kind === "plain") {
            const id = live(next.task)!;
            const task = tasks.get(id)!;
            task.n++;
            if (next.kind === "status") task.status = task.status === "running" ? "pending" : "running";
            await apply(both([record(id)], next.kind === "plain" ? undefined : ++head));
          } else if (next.kind === "end") {
            const id = live(next.task)!;
            tasks.delete(id);
            await apply(both([taskRecord(id, { status: "terminal", outcome: { status: "completed", result: id } })], ++head));
          } else if (next.kind === "trim") {
            await defers.trimLog(Math.max(0, head - next.back));
            await plain.trimLog(Math.max(0, head - next.back));
          } else if (next.kind === "read") await same();
          else if (next.kind === "copy") {
            // Decision 0086: a copy carries no mark (not even one a fenced commit kept): it opens read-only.
            const viewer = await openSqliteStorage({ vfs: "memory", image: await defers.exportImage(), readOnly: true });
            expect(await viewer.query(SEED_QUERY)).toEqual(await plain.query(SEED_QUERY));
            await viewer.close();
          } else {
            const image = await defers.database.exportImage();
            const copy = await plain.database.exportImage();
            // A crash image opens read-only as it is, or is refused (never read behind its log).
            const viewer = await openSqliteStorage({ vfs: "memory", image, readOnly: true }).catch((error: unknown) => {
              expect(error).toBeInstanceOf(TasksBehindLog);
              return undefined;
            });
            if (viewer) {
              expect(await viewer.query(SEED_QUERY)).toEqual(await plain.query(SEED_QUERY));
              await viewer.close();
            }
            defers = await openSqliteStorage({ vfs: "memory", image, deferTaskRows: { flushEvery } });
            plain = await openSqliteStorage({ vfs: "memory", image: copy, deferTaskRows: false });
            expect((await defers.load()).liveTasks).toEqual((await plain.load()).liveTasks);
            await same();
          }
        }
        const image = await defers.database.exportImage();
        await same();
        const reopened = await openSqliteStorage({ vfs: "memory", image });
        expect(await reopened.query(SEED_QUERY)).toEqual(await plain.query(SEED_QUERY));
        for (const each of [defers, plain, reopened]) await each.close();
      }),
      { numRuns: 100, seed: 81 },
    );
  });
});
