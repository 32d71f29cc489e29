import { describe, expect, it } from "vitest";
import { COMMIT_WATCH_HOOK, type CommitWatch, watchCommits } from "../src/browser/commit-watch.ts";
import { MemoryStorage } from "../src/index.ts";
import type { Batch } from "../src/storage/records.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import type { Storage } from "../src/storage/storage.ts";

const batch = (id: number): Batch => ({
  tasks: [],
  conversations: [],
  entries: [{ id, conversationId: 1, kind: "app.note", payload: { id }, at: 0 }],
  submissions: [],
  documents: [],
});
const settles = async (promise: Promise<unknown>) =>
  Promise.race([promise.then(() => true), new Promise((r) => setTimeout(() => r(false), 50))]);

describe("the worker's commit watch (crashEveryCommit's hook)", () => {
  for (const edge of ["after", "before"] as const) {
    it(`freezes ${edge} commit 2: that commit is ${edge === "after" ? "stored" : "not stored"}, and no storage call answers again`, async () => {
      const inner = new MemoryStorage();
      const storage = watchCommits(inner);
      const watch = (globalThis as Record<string, unknown>)[COMMIT_WATCH_HOOK] as CommitWatch;
      await storage.apply(batch(10));
      const frozen = watch.arm({ commit: 2, edge });
      expect(await settles(storage.apply(batch(11)))).toBe(false);
      expect(await frozen).toEqual({ commit: 2, edge });
      expect(await settles(storage.listEntries(1))).toBe(false);
      expect((await inner.listEntries(1)).map((entry) => entry.id)).toEqual(edge === "after" ? [10, 11] : [10]);
      expect(watch.log().map((commit) => commit.line)).toEqual(
        edge === "after" ? ["entry 10 app.note", "entry 11 app.note"] : ["entry 10 app.note"],
      );
    });
  }

  it("keeps the durable log's tail of a fenced storage (readLog, trimLog, maxRowBytes: what a following tab's mirror pushes from, decision 0029)", async () => {
    const inner = new MemoryStorage();
    const storage = watchCommits(inner);
    for (let position = 1; position <= 3; position++) await storage.apply({ ...batch(position), fence: { epoch: 1, position } });
    expect((await storage.readLog!(0, 10)).map((logged) => logged.fence.position)).toEqual([1, 2, 3]);
    await storage.trimLog!(2);
    expect((await inner.readLog!(0, 10)).map((logged) => logged.fence.position)).toEqual([3]);
    expect(storage.maxRowBytes).toBe(inner.maxRowBytes);
  });

  it("refuses to arm a commit that is already stored", async () => {
    const storage = watchCommits(new MemoryStorage());
    const watch = (globalThis as Record<string, unknown>)[COMMIT_WATCH_HOOK] as CommitWatch;
    await storage.apply(batch(10));
    await expect(watch.arm({ commit: 1, edge: "after" })).rejects.toThrow("Commit 1 is already stored");
    expect(watch.count()).toBe(1);
  });

  it("logs every stored commit once, in order, whenever the log is read, and keeps the newest 2,000", async () => {
    const storage = watchCommits(new MemoryStorage());
    const watch = (globalThis as Record<string, unknown>)[COMMIT_WATCH_HOOK] as CommitWatch;
    const lines = (from?: number) => watch.log(from).map((commit) => `${commit.commit}: ${commit.line}`);
    await storage.apply(batch(1));
    expect(lines()).toEqual(["1: entry 1 app.note"]); // read before the next commit: summarized on the read
    for (let id = 2; id <= 100; id++) await storage.apply(batch(id));
    expect(lines(98)).toEqual(["98: entry 98 app.note", "99: entry 99 app.note", "100: entry 100 app.note"]);
    for (let id = 101; id <= 2_130; id++) await storage.apply(batch(id));
    const log = watch.log();
    expect(watch.count()).toBe(2_130);
    expect(log.length).toBe(2_000);
    expect(log.map((commit) => commit.commit)).toEqual(Array.from({ length: 2_000 }, (_, index) => 131 + index));
    expect(log.at(-1)!.line).toBe("entry 2130 app.note");
  });

  it("leaves a SqliteStorage's database reachable (benchmarks and diagnostics write around the kernel with it)", async () => {
    const inner = await openSqliteStorage({ vfs: "memory" });
    const storage = watchCommits(inner) as Storage & { database?: unknown };
    expect(storage.database).toBe(inner.database);
    expect("database" in watchCommits(new MemoryStorage())).toBe(false);
    await inner.close();
  });

  it("decision 0039: passes on the place's own rows outside every batch — its epochs and kept forks (before, a worker's forks were never kept)", async () => {
    const inner = new MemoryStorage();
    const storage = watchCommits(inner);
    await storage.apply({ ...batch(1), fence: { epoch: 2, position: 1 } });
    expect(await storage.readEpochs!()).toEqual([{ epoch: 2, start: 1 }]);
    await storage.keepFork!("fork-1-4", { from: 4 });
    expect(await storage.readForks!()).toEqual([{ key: "fork-1-4", record: { from: 4 } }]);
    await storage.dismissFork!("fork-1-4");
    expect(await inner.readForks()).toEqual([]);
  });

  it("decision 0039: passes on the remembered pinned lease (before, a worker with crash points on never remembered it)", async () => {
    const inner = new MemoryStorage();
    const storage = watchCommits(inner);
    await storage.rememberLease!({ place: "tab", epoch: 2 });
    expect((await inner.load()).pinned).toEqual({ place: "tab", epoch: 2 });
  });
});
