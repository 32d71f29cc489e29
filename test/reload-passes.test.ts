import { afterEach, describe, expect, it, vi } from "vitest";
import { createRegistry, defineExtension, defineTask } from "../src/index.ts";
import { newInvocation } from "../src/tasks/invocation.ts";
import { ctx, openHarness, runUntil, stallNoting } from "./support.ts";

/**
 * Decision 0059: what each started task costs at a reload, in front of the last task by id. The passes that start
 * a recovered backlog 256 at a time keep one list and a cursor into it (no pass copies what is left), and a started
 * invocation is its own cancellation (one object less each). Order and S4's count are unchanged.
 */

const begun: number[] = [];
const stall = stallNoting((id) => void begun.push(id));
/** Commits one step after the reload, then holds. */
const stepped: number[] = [];
const committer = defineTask<null, { phase: "a" | "b" }, null>({
  name: "test.committer",
  version: 1,
  initial: () => ({ phase: "a" }),
  phases: {
    a: async (task, runtime, context) => {
      await runtime.commit(() => ({ status: "running", checkpoint: { phase: "b" } }), context);
      stepped.push(task.id);
    },
    b: async (task, runtime, context) => {
      await runtime.commit(() => ({ status: "running", checkpoint: { phase: "b" } }), context);
      stepped.push(task.id);
      await runtime.untilAborted();
      throw new Error("stopped");
    },
  },
  abort: async () => {},
});
const registry = () => createRegistry().install(defineExtension({ name: "test", tasks: [stall, committer] }));
const SEED_QUERY = "SELECT id, status, record ->> '$.restarts' AS restarts FROM tasks WHERE kind = 'test.stall' ORDER BY id";

afterEach(() => vi.restoreAllMocks());

describe("the passes that start a recovered backlog (decision 0059)", () => {
  it("S4: 1,000 tasks running at the crash start in id order, 256 per pass, no pass copies the backlog it leaves, and a held phase makes no commit actor", async () => {
    const { openSqliteStorage } = await import("../src/storage/sqlite/open-storage.ts");
    const seeded = await openSqliteStorage({ vfs: "memory" });
    const first = await openHarness(seeded, { registry: registry() });
    const root = await first.harness.root(ctx);
    await root.commit((tx) => {
      for (let index = 0; index < 1000; index++) tx.createTask(stall, null);
    }, ctx);
    first.harness.resume();
    await runUntil(first.clock, () => begun.length === 1000);
    const ids = [...begun].sort((a, b) => a - b);
    await root.commit((tx) => tx.createTask(committer, null), ctx);
    await runUntil(first.clock, () => stepped.length === 2); // held in phase b
    const committerId = stepped[1]!;
    const image = await seeded.exportImage(); // the crash: never closed

    const storage = await openSqliteStorage({ vfs: "memory", image });
    // The actors of commits, frozen one per runtime (`{ conversationId, taskId }`), and copies of an id list longer than one pass's batch, made from the open until the whole backlog has started.
    const slice = Array.prototype.slice;
    let backlogCopies = 0;
    const freeze = Object.freeze;
    const actors: number[] = [];
    vi.spyOn(Object, "freeze").mockImplementation(<T>(value: T): Readonly<T> => {
      const keys = value !== null && typeof value === "object" ? Object.keys(value) : [];
      if (keys.length === 2 && keys[0] === "conversationId" && keys[1] === "taskId") actors.push((value as { taskId: number }).taskId);
      return freeze(value);
    });
    vi.spyOn(Array.prototype, "slice").mockImplementation(function (this: unknown[], ...args: [number?, number?]) {
      if (this.length > 256 && typeof this[0] === "number") backlogCopies++;
      return slice.apply(this, args);
    });
    begun.length = 0;
    stepped.length = 0;
    const { harness, clock } = await openHarness(storage, { registry: registry(), resume: true });
    // S4/S11: every restart is counted in the seed's query before any task begins.
    expect(begun).toEqual([]);
    const counted = await storage.query(SEED_QUERY);
    await runUntil(clock, () => begun.length === 1000 && stepped.length === 1);
    vi.restoreAllMocks();
    // Before: each full pass kept the rest with `ordered.slice(position)` (744, 488 and 232 ids here; 40 passes and
    // about 200,000 ids for 10,000 tasks).
    expect(backlogCopies).toBe(0);
    expect(counted).toEqual(ids.map((id) => ({ id, status: "running", restarts: 1 })));
    expect(begun).toEqual(ids); // id order, as before
    // A held phase that never commits makes no actor (before: one each, 1,000 here); the task that commits has one.
    expect(actors).toEqual([committerId]);
    await harness.close(ctx);
  });
});

describe("a started invocation (decision 0059)", () => {
  it("is its own cancellation, and the phase's context still cannot abort it", async () => {
    const task = { id: 7 } as Parameters<typeof newInvocation>[0];
    const invocation = newInvocation(task, stall as never, "run");
    // Before: a LazyAbort of its own per invocation (one more object kept per started task at a reload).
    expect(invocation.cancellation).toBe(invocation);
    expect("abort" in invocation.context).toBe(false);
    const context = invocation.context as typeof invocation.context & { cancelled: boolean };
    const ended = invocation.cancellation.whenAborted();
    expect(context.cancelled).toBe(false);
    invocation.cancellation.abort(() => new Error("stop"));
    await ended;
    expect(context.cancelled).toBe(true);
    expect(context.abortSignal?.aborted).toBe(true);
    expect((context.abortSignal?.reason as Error | undefined)?.message).toBe("stop");
  });
});
