import { describe, expect, it } from "vitest";
import {
  type Batch,
  createRegistry,
  defineExtension,
  defineTask,
  MemoryStorage,
  StorageQuotaExceeded,
  type TaskDefinition,
} from "../src/index.ts";
import { backends, ctx, flush, openHarness } from "./support.ts";

function registryWith(...tasks: TaskDefinition<any, any, any>[]) {
  return createRegistry().install(defineExtension({ name: "test", tasks }));
}

/** Waits for its abort signal; its abort handler records the order in which aborts ran. */
function patient(order: string[]) {
  return defineTask<{ label: string }, { phase: "wait" }, string>({
    name: "test.patient",
    version: 1,
    initial: () => ({ phase: "wait" }),
    phases: {
      wait: async (_task, runtime) => {
        await new Promise((resolve) => runtime.signal.addEventListener("abort", resolve));
        throw new Error("signalled");
      },
    },
    abort: async (task, runtime, context) => {
      order.push(task.input.label);
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted", reason: "asked" } }), context);
    },
  });
}

for (const backend of backends) {
  describe(`ownership and abort on ${backend.name}`, () => {
    it("S1/S3: abortTask marks the owned subtree; abort handlers run bottom-up", async () => {
      const order: string[] = [];
      const leaf = patient(order);
      const owner = defineTask<null, { phase: "spawn" | "hold" }, string>({
        name: "test.owner",
        version: 1,
        initial: () => ({ phase: "spawn" }),
        phases: {
          spawn: async (_t, runtime, context) =>
            runtime.commit((tx) => {
              const child = tx.createTask(leaf, { label: "child" });
              return { status: "waiting", checkpoint: { phase: "hold" }, on: [child] };
            }, context),
          hold: async () => {},
        },
        abort: async (_task, runtime, context) => {
          order.push("owner");
          await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context);
        },
      });
      const { harness } = await openHarness(await backend.create(), { registry: registryWith(leaf, owner) });
      const root = await harness.root(ctx);
      const id = await root.commit((tx) => tx.createTask(owner, null), ctx);
      harness.resume();
      await flush();
      const child = (await harness.inspect(ctx)).tasks.find((t) => t.record.kind === "test.patient")!.record;
      expect(child.owner).toBe(id);
      expect(await harness.abortTask(id, ctx)).toBe("marked");
      const ended = await harness.waitForTask(id, ctx);
      expect(ended.state).toEqual({ status: "terminal", outcome: { status: "aborted" } });
      expect((await harness.getTask(child.id, ctx))!.state).toEqual({
        status: "terminal",
        outcome: { status: "aborted", reason: "asked" },
      });
      expect(order).toEqual(["child", "owner"]);
    });

    it("S1: a task that ends while its owned work is live is held as completing, then finalized", async () => {
      let release!: () => void;
      const child = defineTask<null, { phase: "work" }, string>({
        name: "test.slowchild",
        version: 1,
        initial: () => ({ phase: "work" }),
        phases: {
          work: async (_t, runtime, context) => {
            await new Promise<void>((resolve) => (release = resolve));
            await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "late" } }), context);
          },
        },
        abort: async () => {},
      });
      const owner = defineTask<null, { phase: "go" }, string>({
        name: "test.hasty",
        version: 1,
        initial: () => ({ phase: "go" }),
        phases: {
          go: async (_t, runtime, context) => {
            await runtime.commit((tx) => void tx.createTask(child, null), context);
            await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "early" } }), context);
          },
        },
        abort: async () => {},
      });
      const { harness } = await openHarness(await backend.create(), { registry: registryWith(child, owner) });
      const root = await harness.root(ctx);
      const id = await root.commit((tx) => tx.createTask(owner, null), ctx);
      harness.resume();
      await flush();
      expect((await harness.getTask(id, ctx))!.state).toEqual({ status: "completing", outcome: { status: "completed", result: "early" } });
      const waiting = harness.waitForTask(id, ctx);
      release();
      expect((await waiting).state).toEqual({ status: "terminal", outcome: { status: "completed", result: "early" } });
    });

    it("S2: a record of an older version migrates at reservation; a missing migration blocks it", async () => {
      const v1 = defineTask<{ a: number }, { phase: "go" }, number>({
        name: "test.versioned",
        version: 1,
        initial: () => ({ phase: "go" }),
        phases: {},
        abort: async () => {},
      });
      const storage = await backend.create();
      const first = await openHarness(storage, { registry: createRegistry() });
      const root = await first.harness.root(ctx);
      const id = await root.commit((tx) => tx.createTask(v1, { a: 20 }), ctx);
      await first.harness.close(ctx);

      const v2NoMigration = defineTask<{ b: number }, { phase: "run" }, number>({
        name: "test.versioned",
        version: 2,
        initial: () => ({ phase: "run" }),
        phases: { run: async () => {} },
        abort: async () => {},
      });
      const blocked = await openHarness(storage, { registry: registryWith(v2NoMigration) });
      blocked.harness.resume();
      await flush();
      expect((await blocked.harness.inspect(ctx)).tasks[0]!.state).toMatchObject({ kind: "blocked", reason: "migration_failed" });
      await blocked.harness.close(ctx);

      const v2 = defineTask<{ b: number }, { phase: "run" }, number>({
        ...v2NoMigration,
        migrate: (input, checkpoint, from) => {
          expect([checkpoint, from]).toEqual([{ phase: "go" }, 1]);
          return { input: { b: (input as { a: number }).a + 1 }, checkpoint: { phase: "run" } };
        },
        phases: {
          run: async (task, runtime, context) =>
            runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: task.input.b } }), context),
        },
      });
      const migrated = await openHarness(storage, { registry: registryWith(v2) });
      const ended = await migrated.harness.waitForTask(id, ctx);
      expect(ended.version).toBe(2);
      expect(ended.input).toEqual({ b: 21 });
      expect(ended.state).toEqual({ status: "terminal", outcome: { status: "completed", result: 21 } });
    });

    it("S1: ids come from one global space shared by conversations and tasks", async () => {
      const def = defineTask<null, { phase: "x" }, null>({
        name: "test.idle",
        version: 1,
        initial: () => ({ phase: "x" }),
        phases: {},
        abort: async () => {},
      });
      const { harness } = await openHarness(await backend.create(), { registry: createRegistry() });
      const root = await harness.root(ctx);
      const ids = await root.commit((tx) => [tx.createTask(def, null), tx.createConversation(), tx.createTask(def, null)], ctx);
      expect([root.id, ...ids]).toEqual([1, 2, 3, 4]);
    });

    it("a commit callback that throws writes nothing and rethrows", async () => {
      const def = defineTask<null, { phase: "x" }, null>({
        name: "test.idle",
        version: 1,
        initial: () => ({ phase: "x" }),
        phases: {},
        abort: async () => {},
      });
      const { harness } = await openHarness(await backend.create(), { registry: createRegistry() });
      const root = await harness.root(ctx);
      await expect(
        root.commit((tx) => {
          tx.createTask(def, null);
          throw new Error("changed my mind");
        }, ctx),
      ).rejects.toThrow("changed my mind");
      expect((await harness.inspect(ctx)).tasks).toEqual([]);
      const next = await root.commit((tx) => tx.createTask(def, null), ctx);
      expect(next).toBe(root.id + 1); // the id minted by the failed commit was not consumed
    });
  });
}

describe("storage failures", () => {
  it("bad input: a full storage quota rejects commits, loses nothing and is retried with backoff, not in a hot loop", async () => {
    class FullDisk extends MemoryStorage {
      refuse = 0;
      attempts = 0;
      override async apply(batch: Batch) {
        this.attempts++;
        if (this.refuse > 0) {
          this.refuse--;
          throw new StorageQuotaExceeded("The storage quota is exhausted.");
        }
        return super.apply(batch);
      }
    }
    const storage = new FullDisk();
    let runs = 0;
    const task = defineTask<null, { phase: "a" | "b" }, string>({
      name: "test.quota",
      version: 1,
      initial: () => ({ phase: "a" }),
      phases: {
        a: async (_t, runtime, context) => {
          if (runs++ === 0) storage.refuse = 2; // this commit and the first retried one are refused
          await runtime.commit(() => ({ status: "running", checkpoint: { phase: "b" } }), context);
        },
        b: async (_t, runtime, context) =>
          runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "stored" } }), context),
      },
      abort: async () => {},
    });
    const { harness, clock, reports } = await openHarness(storage, { registry: registryWith(task) });
    const root = await harness.root(ctx);
    const id = await root.commit((tx) => tx.createTask(task, null), ctx);
    let done: string | undefined;
    void harness.waitForTask(id, ctx).then((t) => (done = (t.state as { outcome: { result: string } }).outcome.result));
    await flush();
    const attemptsBeforeTime = storage.attempts;
    await flush(20);
    expect(storage.attempts).toBe(attemptsBeforeTime); // no retry until the clock moves: no hot loop
    for (let i = 0; i < 10 && done === undefined; i++) {
      clock.advance(30_000);
      await flush();
    }
    expect(done).toBe("stored");
    expect(runs).toBe(3); // phase a ran again after each refused commit; the task was never faulted
    expect(reports.filter((r) => r.kind === "error").map((r) => (r as { error: Error }).error.name)).toContain("StorageQuotaExceeded");
  });
});

describe("storage failures in the scheduler's own commits", () => {
  it("a refused reservation pass starts nothing, and the task runs once storage takes commits again", async () => {
    class Flaky extends MemoryStorage {
      refuse = 0;
      override async apply(batch: Batch) {
        if (this.refuse > 0) {
          this.refuse--;
          throw new StorageQuotaExceeded("The storage quota is exhausted.");
        }
        return super.apply(batch);
      }
    }
    const storage = new Flaky();
    let runs = 0;
    const task = defineTask<null, { phase: "go" }, string>({
      name: "test.once",
      version: 1,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async (_t, runtime, context) => {
          runs++;
          await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "ran" } }), context);
        },
      },
      abort: async () => {},
    });
    const { harness, clock } = await openHarness(storage, { registry: registryWith(task) });
    const root = await harness.root(ctx);
    const id = await root.commit((tx) => tx.createTask(task, null), ctx);
    storage.refuse = 2; // the reservation pass, and its first retry
    let done = false;
    void harness.waitForTask(id, ctx).then(() => (done = true));
    await flush();
    expect(runs).toBe(0); // the refused reservation started no phase
    for (let i = 0; i < 10 && !done; i++) {
      clock.advance(1_000);
      await flush();
    }
    expect(done).toBe(true);
    expect(runs).toBe(1);
  });
});

describe("many tasks", () => {
  it("S4: a thousand tasks cut by a crash all resume (reserved in batches) and each completes once", async () => {
    let runs = 0;
    const storage = new MemoryStorage();
    let holding = true;
    const task = defineTask<null, { phase: "go" }, string>({
      name: "test.many",
      version: 1,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async (_t, runtime, context) => {
          runs++;
          if (holding) await new Promise(() => {}); // the first process dies with all of them running
          await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "ok" } }), context);
        },
      },
      abort: async () => {},
    });
    const registry = registryWith(task);
    const first = await openHarness(storage, { registry });
    const root = await first.harness.root(ctx);
    const ids = await root.commit((tx) => Array.from({ length: 1000 }, () => tx.createTask(task, null)), ctx);
    first.harness.resume();
    await flush(30);
    expect((await first.harness.inspect(ctx)).tasks.filter((t) => t.record.state.status === "running")).toHaveLength(1000);
    const image = await storage.exportImage();
    holding = false;
    runs = 0;
    const second = await openHarness(MemoryStorage.fromImage(image), { registry });
    expect(second.harness.recovery.tasks).toHaveLength(1000);
    const ended = await Promise.all(ids.map((id) => second.harness.waitForTask(id, ctx)));
    expect(ended.every((t) => t.state.status === "terminal" && t.state.outcome.status === "completed")).toBe(true);
    expect(runs).toBe(1000);
  });
});

describe("a phase's context", () => {
  it("is cancelled when the invocation ends, also as seen from a context derived from it with chord", async () => {
    const { createContextKey, withContextValue } = await import("@earendil-works/chord/context");
    const key = createContextKey<string>("test.key");
    let derivedSignal: AbortSignal | undefined;
    let runtimeSignal: AbortSignal | undefined;
    let lateSignal: (() => AbortSignal) | undefined;
    const task = defineTask<null, { phase: "go" }, string>({
      name: "test.context",
      version: 1,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async (_t, runtime, context) => {
          const derived = withContextValue(key, "v", context);
          derivedSignal = derived.abortSignal;
          expect(derived.value(key)).toBe("v");
          expect(derivedSignal?.aborted).toBe(false);
          runtimeSignal = runtime.signal;
          lateSignal = () => context.abortSignal!; // asked for only after the invocation ended
          await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "ok" } }), context);
        },
      },
      abort: async () => {},
    });
    const { harness } = await openHarness(new MemoryStorage(), { registry: registryWith(task) });
    const root = await harness.root(ctx);
    const id = await root.commit((tx) => tx.createTask(task, null), ctx);
    await harness.waitForTask(id, ctx);
    await flush();
    expect(derivedSignal?.aborted).toBe(true);
    expect(runtimeSignal).toBe(derivedSignal);
    expect(lateSignal!().aborted).toBe(true);
    expect(lateSignal!().reason).toMatchObject({ name: "InvocationEnded" });
  });
});
