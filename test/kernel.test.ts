import { describe, expect, it } from "vitest";
import {
  createRegistry,
  defineExtension,
  defineTask,
  InvalidSetting,
  ReadOnlySession,
  type Storage,
  type TaskDefinition,
} from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { backends, ctx, flush, never, openHarness, runUntil } from "./support.ts";

/** A task that runs `steps` phases, each a committed checkpoint; `onStep` sees each step before its commit. */
function stepper(onStep: (n: number) => void | Promise<void> = () => {}, name = "test.stepper") {
  return defineTask<{ steps: number }, { phase: "step"; n: number }, string>({
    name,
    version: 1,
    initial: () => ({ phase: "step", n: 0 }),
    phases: {
      step: async (task, runtime, context) => {
        const n = task.state.checkpoint.n;
        await onStep(n);
        if (n + 1 >= task.input.steps) {
          await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: `did ${n + 1}` } }), context);
        } else {
          await runtime.commit(() => ({ status: "running", checkpoint: { phase: "step", n: n + 1 } }), context);
        }
      },
    },
    abort: async (_task, runtime, context) => runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context),
  });
}

function registryWith(...tasks: TaskDefinition<any, any, any>[]) {
  return createRegistry().install(defineExtension({ name: "test", tasks }));
}

async function create(storage: Storage, definition: TaskDefinition<any, any, any>, input: unknown, registry = registryWith(definition)) {
  const opened = await openHarness(storage, { registry });
  const root = await opened.harness.root(ctx);
  const id = await root.commit((tx) => tx.createTask(definition, input), ctx);
  return { ...opened, id };
}

for (const backend of backends) {
  describe(`kernel on ${backend.name}`, () => {
    it("S4: open turns running into pending with restarts + 1 and leaves waiting, sleeping and pending alone", async () => {
      const storage = await backend.create();
      const blocker = defineTask<null, { phase: "wait" | "go" }, string>({
        name: "test.blocker",
        version: 1,
        initial: () => ({ phase: "go" }),
        phases: { go: async () => void (await never()), wait: async () => {} },
        abort: async () => {},
      });
      const sleeper = defineTask<null, { phase: "nap" | "woke" }, string>({
        name: "test.sleeper",
        version: 1,
        initial: () => ({ phase: "nap" }),
        phases: {
          nap: async (_t, runtime, context) => runtime.sleepUntil(runtime.now() + 10_000, { phase: "woke" }, context),
          woke: async (_t, runtime, context) =>
            runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "woke" } }), context),
        },
        abort: async () => {},
      });
      const waiter = defineTask<{ on: number }, { phase: "park" | "done" }, string>({
        name: "test.waiter",
        version: 1,
        initial: () => ({ phase: "park" }),
        phases: {
          park: async (task, runtime, context) =>
            runtime.commit(() => ({ status: "waiting", checkpoint: { phase: "done" }, on: [task.input.on] }), context),
          done: async (_t, runtime, context) =>
            runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "done" } }), context),
        },
        abort: async () => {},
      });
      const registry = registryWith(blocker, sleeper, waiter);
      const { harness, clock } = await openHarness(storage, { registry });
      const root = await harness.root(ctx);
      const ids = await root.commit((tx) => {
        const running = tx.createTask(blocker, null);
        return { running, sleeping: tx.createTask(sleeper, null), waiting: tx.createTask(waiter, { on: running }) };
      }, ctx);
      harness.resume();
      await runUntil(clock, async () => {
        const tasks = (await harness.inspect(ctx)).tasks.map((t) => t.record.state.status);
        return tasks.join() === "running,sleeping,waiting";
      });
      const pendingId = await root.commit((tx) => tx.createTask(stepper(), { steps: 1 }), ctx); // created, not yet run
      const image = await storage.exportImage();
      void harness; // the process dies here

      const reopened = await openHarness(await backend.fromImage(image), { registry, clock: createManualClock(clock.now()) });
      const get = (id: number) => reopened.harness.getTask(id, ctx);
      expect((await get(ids.running))!.state.status).toBe("pending");
      expect((await get(ids.running))!.restarts).toBe(1);
      expect((await get(ids.sleeping))!.state).toEqual({
        status: "sleeping",
        until: 11_000,
        checkpoint: { phase: "woke" },
        progressed: expect.any(Number),
      });
      expect((await get(ids.sleeping))!.restarts).toBeUndefined();
      expect((await get(ids.waiting))!.state.status).toBe("waiting");
      expect((await get(ids.waiting))!.restarts).toBeUndefined();
      expect((await get(pendingId))!.state.status).toBe("pending");
      expect((await get(pendingId))!.restarts).toBeUndefined();
      // Nothing runs before resume(): the pending stepper is still pending after a while.
      await flush();
      expect((await get(pendingId))!.state.status).toBe("pending");
    });

    it("S3/S4: a sleeping task wakes at `until` after a reopen, driven by the injected clock", async () => {
      const storage = await backend.create();
      const sleeper = defineTask<null, { phase: "nap" | "woke" }, number>({
        name: "test.sleeper",
        version: 1,
        initial: () => ({ phase: "nap" }),
        phases: {
          nap: async (_t, runtime, context) => runtime.sleepUntil(runtime.now() + 60_000, { phase: "woke" }, context),
          woke: async (_t, runtime, context) =>
            runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: runtime.now() } }), context),
        },
        abort: async () => {},
      });
      const registry = registryWith(sleeper);
      const { harness, clock, id } = await create(storage, sleeper, null, registry);
      harness.resume();
      await runUntil(clock, async () => (await harness.getTask(id, ctx))!.state.status === "sleeping");
      const image = await storage.exportImage();

      const later = createManualClock(clock.now() + 30_000);
      const reopened = await openHarness(await backend.fromImage(image), { registry, clock: later });
      let done: number | undefined;
      void reopened.harness.waitForTask(id, ctx).then((t) => (done = (t.state as any).outcome.result));
      await flush();
      expect(done).toBeUndefined();
      later.advance(29_999);
      await flush();
      expect(done).toBeUndefined();
      expect((await reopened.harness.inspect(ctx)).tasks[0]!.state).toEqual({ kind: "sleeping", until: 61_000 });
      later.advance(1);
      await flush();
      expect(done).toBe(61_000);
    });

    it("S6: a task killed 5 times in a row without progress is not run a sixth time and ends faulted", async () => {
      let runs = 0;
      const storage = await backend.create();
      let image: Uint8Array | undefined;
      const crashy = defineTask<null, { phase: "work" }, string>({
        name: "test.crashy",
        version: 1,
        initial: () => ({ phase: "work" }),
        phases: {
          work: async () => {
            runs++;
            image = await current.exportImage();
            await never();
          },
        },
        abort: async () => {},
      });
      const registry = registryWith(crashy);
      let current: Storage = storage;
      const first = await create(storage, crashy, null, registry);
      const id = first.id;
      first.harness.resume();
      await runUntil(first.clock, () => image !== undefined);
      const allReports = [];
      for (let kill = 1; kill <= 5; kill++) {
        current = await backend.fromImage(image!);
        image = undefined;
        const opened = await openHarness(current, { registry });
        expect((await opened.harness.getTask(id, ctx))!.restarts).toBe(kill);
        opened.harness.resume();
        if (kill < 5) {
          await runUntil(opened.clock, () => image !== undefined);
          continue;
        }
        const ended = await opened.harness.waitForTask(id, ctx);
        allReports.push(...opened.reports);
        expect(ended.state).toEqual({
          status: "terminal",
          outcome: {
            status: "faulted",
            error: { message: expect.stringContaining("restart limit is 5"), detail: { reason: "restart_limit", restarts: 5 } },
          },
        });
        expect(ended.restarts).toBeUndefined();
      }
      expect(runs).toBe(5);
      expect(allReports.filter((r) => r.kind === "task_faulted")).toEqual([
        expect.objectContaining({ kind: "task_faulted", taskId: id, taskKind: "test.crashy", reason: "restart_limit" }),
      ]);
    });

    it("S6: progress between kills clears restarts, so the task keeps running; restartLimit Infinity never trips", async () => {
      for (const restartLimit of [2, Infinity]) {
        const storage = await backend.create();
        let image: Uint8Array | undefined;
        let crashAt: number | undefined;
        let current: Storage = storage;
        const task = stepper(async (n) => {
          if (n === crashAt) {
            image = await current.exportImage();
            await never();
          }
        });
        const registry = registryWith(task);
        const opened = await openHarness(storage, { registry, settings: { restartLimit } });
        const root = await opened.harness.root(ctx);
        const id = await root.commit((tx) => tx.createTask(task, { steps: 8 }), ctx);
        // Kill at step 1, 2, 3, ... 6: every reopen makes one step of progress first.
        const kills = restartLimit === Infinity ? [1, 1, 1, 1, 1, 1, 2, 3] : [1, 2, 3, 4, 5, 6];
        if (restartLimit === Infinity) {
          // Same step every time: with no limit it is rerun forever.
        }
        crashAt = kills[0];
        opened.harness.resume();
        await runUntil(opened.clock, () => image !== undefined);
        for (const next of kills.slice(1)) {
          current = await backend.fromImage(image!);
          image = undefined;
          crashAt = next;
          const again = await openHarness(current, { registry, settings: { restartLimit } });
          again.harness.resume();
          await runUntil(again.clock, () => image !== undefined);
          expect((await again.harness.getTask(id, ctx))!.state.status).toBe("running");
        }
        current = await backend.fromImage(image!);
        crashAt = undefined;
        const last = await openHarness(current, { registry, settings: { restartLimit } });
        const ended = await last.harness.waitForTask(id, ctx);
        expect(ended.state).toEqual({ status: "terminal", outcome: { status: "completed", result: "did 8" } });
        expect(last.reports).toEqual([]);
      }
    });

    it('S6: restartLimit 0, -1, 2.5 and "5" are rejected at open with a clear error', async () => {
      const storage = await backend.create();
      for (const restartLimit of [0, -1, 2.5, "5", NaN]) {
        await expect(openHarness(storage, { settings: { restartLimit: restartLimit as number } })).rejects.toThrow(InvalidSetting);
        await expect(openHarness(storage, { settings: { restartLimit: restartLimit as number } })).rejects.toThrow(
          /restartLimit must be a positive integer or Infinity/,
        );
      }
      await expect(openHarness(storage, { settings: { restartLimit: 1 } })).resolves.toBeDefined();
    });

    it("S5: read-only open leaves running rows running; writes, resume() and task creation reject with ReadOnlySession", async () => {
      const storage = await backend.create();
      let image: Uint8Array | undefined;
      const task = stepper(async (n) => {
        if (n === 1) {
          image = await storage.exportImage();
          await never();
        }
      });
      const registry = registryWith(task);
      const { harness, clock, id } = await create(storage, task, { steps: 3 }, registry);
      harness.resume();
      await runUntil(clock, () => image !== undefined);

      const copy = await backend.fromImage(image!);
      const readOnly = await openHarness(copy, { registry, readOnly: true });
      expect(readOnly.harness.readOnly).toBe(true);
      const row = (await readOnly.harness.getTask(id, ctx))!;
      expect(row.state).toEqual({ status: "running", checkpoint: { phase: "step", n: 1 }, progressed: expect.any(Number) }); // decision 0112
      expect(row.restarts).toBeUndefined();
      const inspection = await readOnly.harness.inspect(ctx);
      expect(inspection.scheduling).toBe("read-only");
      expect(inspection.tasks.map((t) => t.record.id)).toEqual([id]);
      expect(() => readOnly.harness.resume()).toThrow(ReadOnlySession);
      const root = await readOnly.harness.root(ctx);
      await expect(root.commit((tx) => tx.createTask(task, { steps: 1 }), ctx)).rejects.toThrow(ReadOnlySession);
      await expect(readOnly.harness.abortTask(id, ctx)).rejects.toThrow(ReadOnlySession);
      // Nothing changed underneath: a writable open still finds the crash to count.
      const writable = await openHarness(copy, { registry });
      expect((await writable.harness.getTask(id, ctx))!.restarts).toBe(1);
    });

    it("S2: a phase that returns without progress and a phase that throws both end faulted with a task_faulted report", async () => {
      const lazy = defineTask<null, { phase: "idle" }, string>({
        name: "test.lazy",
        version: 1,
        initial: () => ({ phase: "idle" }),
        phases: { idle: async () => {} },
        abort: async () => {},
      });
      const thrower = defineTask<null, { phase: "boom" }, string>({
        name: "test.thrower",
        version: 1,
        initial: () => ({ phase: "boom" }),
        phases: {
          boom: async () => {
            throw new Error("kaput");
          },
        },
        abort: async () => {},
      });
      const storage = await backend.create();
      const registry = registryWith(lazy, thrower);
      const { harness, reports } = await openHarness(storage, { registry });
      const root = await harness.root(ctx);
      const [a, b] = await root.commit((tx) => [tx.createTask(lazy, null), tx.createTask(thrower, null)], ctx);
      const lazyEnd = await harness.waitForTask(a!, ctx);
      const throwEnd = await harness.waitForTask(b!, ctx);
      expect(lazyEnd.state).toEqual({
        status: "terminal",
        outcome: { status: "faulted", error: { message: "Task test.lazy phase idle returned without durable progress." } },
      });
      expect(throwEnd.state).toEqual({ status: "terminal", outcome: { status: "faulted", error: { message: "kaput" } } });
      expect(reports).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ kind: "task_faulted", taskId: a, reason: "no_progress" }),
          expect.objectContaining({ kind: "task_faulted", taskId: b, reason: "phase_failed", message: "kaput" }),
        ]),
      );
      expect(reports.filter((r) => r.kind === "task_faulted")).toHaveLength(2);
    });

    it("S3: memo — first write wins among concurrent candidates; memos survive a reopen and are gone at terminal", async () => {
      const storage = await backend.create();
      let image: Uint8Array | undefined;
      const seen: unknown[] = [];
      const memoTask = defineTask<null, { phase: "race" | "check" | "end" }, string>({
        name: "test.memo",
        version: 1,
        initial: () => ({ phase: "race" }),
        phases: {
          race: async (_t, runtime, context) => {
            const winners = await Promise.all(["a", "b", "c"].map((candidate) => runtime.memo("decision", candidate, context)));
            seen.push(...winners);
            await runtime.commit(() => ({ status: "running", checkpoint: { phase: "check" } }), context);
          },
          check: async () => {
            image = await storage.exportImage();
            await never();
          },
          end: async () => {},
        },
        abort: async () => {},
      });
      const after = defineTask<null, { phase: "race" | "check" | "end" }, string>({
        ...memoTask,
        phases: {
          ...memoTask.phases,
          check: async (_t, runtime, context) => {
            seen.push(await runtime.memo("decision", context));
            seen.push(await runtime.memo("decision", "z", context));
            await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "ok" } }), context);
          },
        },
      });
      const { harness, clock, id } = await create(storage, memoTask, null);
      harness.resume();
      await runUntil(clock, () => image !== undefined);
      expect(seen).toEqual(["a", "a", "a"]);
      const reopened = await openHarness(await backend.fromImage(image!), { registry: registryWith(after) });
      expect((await reopened.harness.getTask(id, ctx))!.memos).toEqual({ decision: "a" });
      const ended = await reopened.harness.waitForTask(id, ctx);
      expect(seen).toEqual(["a", "a", "a", "a", "a"]);
      expect(ended.memos).toBeUndefined();
    });

    it("bad input: a task whose kind is not installed stays pending, inspect() says blocked, and it runs once installed", async () => {
      const storage = await backend.create();
      const task = stepper(() => {}, "test.later");
      const registry = createRegistry();
      const { harness, id } = await create(storage, task, { steps: 2 }, registry);
      harness.resume();
      await flush();
      const inspection = await harness.inspect(ctx);
      expect(inspection.tasks).toEqual([
        {
          record: expect.objectContaining({ id, state: { status: "pending", checkpoint: { phase: "step", n: 0 } } }),
          state: { kind: "blocked", reason: "missing_task", message: expect.stringContaining("test.later") },
        },
      ]);
      registry.install(defineExtension({ name: "late", tasks: [task] }));
      const ended = await harness.waitForTask(id, ctx);
      expect(ended.state).toEqual({ status: "terminal", outcome: { status: "completed", result: "did 2" } });
    });

    it("S3: a task waits for its children (allSettled) and reads their outcomes; failFast aborts the siblings of a failure", async () => {
      const child = defineTask<{ fail: boolean; hang?: boolean }, { phase: "go" }, string>({
        name: "test.child",
        version: 1,
        initial: () => ({ phase: "go" }),
        phases: {
          go: async (task, runtime, context) => {
            if (task.input.hang) {
              await new Promise((resolve) => runtime.signal.addEventListener("abort", resolve));
              throw new Error("signalled");
            }
            const outcome = task.input.fail
              ? { status: "failed" as const, error: { message: "nope" } }
              : { status: "completed" as const, result: "yes" };
            await runtime.commit(() => ({ status: "terminal", outcome }), context);
          },
        },
        abort: async (_t, runtime, context) =>
          runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted", reason: "sibling failed" } }), context),
      });
      const parent = defineTask<
        { policy: "allSettled" | "failFast"; children: Array<{ fail: boolean; hang?: boolean }> },
        { phase: "spawn" | "collect"; ids?: number[] },
        unknown
      >({
        name: "test.parent",
        version: 1,
        initial: () => ({ phase: "spawn" }),
        phases: {
          spawn: async (task, runtime, context) =>
            runtime.commit((tx) => {
              const ids = task.input.children.map((input) => tx.createTask(child, input));
              return { status: "waiting", checkpoint: { phase: "collect", ids }, on: ids, policy: task.input.policy };
            }, context),
          collect: async (task, runtime, context) => {
            const outcomes = await runtime.outcomes(task.state.checkpoint.ids!, context);
            await runtime.commit(
              () => ({ status: "terminal", outcome: { status: "completed", result: outcomes.map((o) => o.status) } }),
              context,
            );
          },
        },
        abort: async () => {},
      });
      const storage = await backend.create();
      const registry = registryWith(child, parent);
      const { harness } = await openHarness(storage, { registry });
      const root = await harness.root(ctx);
      const settled = await root.commit(
        (tx) => tx.createTask(parent, { policy: "allSettled", children: [{ fail: false }, { fail: true }] }),
        ctx,
      );
      expect((await harness.waitForTask(settled, ctx)).state).toEqual({
        status: "terminal",
        outcome: { status: "completed", result: ["completed", "failed"] },
      });
      const fast = await root.commit(
        (tx) => tx.createTask(parent, { policy: "failFast", children: [{ fail: false, hang: true }, { fail: true }] }),
        ctx,
      );
      expect((await harness.waitForTask(fast, ctx)).state).toEqual({
        status: "terminal",
        outcome: { status: "completed", result: ["aborted", "failed"] },
      });
    });

    it("S4: close() joins running phases and parks their tasks as pending without counting a restart", async () => {
      const storage = await backend.create();
      let started = false;
      const patient = defineTask<null, { phase: "wait" }, string>({
        name: "test.patient",
        version: 1,
        initial: () => ({ phase: "wait" }),
        phases: {
          wait: async (_t, runtime) => {
            started = true;
            await new Promise((resolve) => runtime.signal.addEventListener("abort", resolve));
          },
        },
        abort: async () => {},
      });
      const registry = registryWith(patient);
      const { harness, clock, id } = await create(storage, patient, null, registry);
      harness.resume();
      await runUntil(clock, () => started);
      await harness.close(ctx);
      const reopened = await openHarness(storage, { registry });
      const row = (await reopened.harness.getTask(id, ctx))!;
      expect(row.state).toEqual({ status: "pending", checkpoint: { phase: "wait" } });
      expect(row.restarts).toBeUndefined();
      expect(reopened.reports).toEqual([]);
    });
  });
}

describe("open with resume", () => {
  it("S4/S6: open({ resume: true }) keeps crashed tasks running with restarts + 1, takes them again, and still stops a crash loop", async () => {
    const storage = await backends[1]!.create();
    let image: Uint8Array | undefined;
    let current: Storage = storage;
    let runs = 0;
    const crashy = defineTask<null, { phase: "work" }, string>({
      name: "test.crashy-resume",
      version: 1,
      initial: () => ({ phase: "work" }),
      phases: {
        work: async () => {
          runs++;
          image = await current.exportImage();
          await never();
        },
      },
      abort: async () => {},
    });
    const registry = registryWith(crashy);
    const first = await openHarness(storage, { registry });
    const root = await first.harness.root(ctx);
    const id = await root.commit((tx) => tx.createTask(crashy, null), ctx);
    first.harness.resume();
    await runUntil(first.clock, () => image !== undefined);
    for (let kill = 1; kill <= 2; kill++) {
      current = await backends[1]!.fromImage(image!);
      image = undefined;
      const rows = await current.query("SELECT status, record ->> '$.restarts' AS restarts FROM tasks WHERE id = ?", id);
      expect(rows).toEqual([{ status: "running", restarts: kill === 1 ? null : kill - 1 }]);
      const opened = await openHarness(current, { registry, resume: true, settings: { restartLimit: 2 } });
      if (kill === 1) {
        await runUntil(opened.clock, () => image !== undefined); // taken again at once, no resume() call
        expect(await current.query("SELECT status, record ->> '$.restarts' AS restarts FROM tasks WHERE id = ?", id)).toEqual([
          { status: "running", restarts: 1 },
        ]);
      } else {
        const ended = await opened.harness.waitForTask(id, ctx);
        expect(ended.state).toMatchObject({
          status: "terminal",
          outcome: { status: "faulted", error: { detail: { reason: "restart_limit", restarts: 2 } } },
        });
      }
    }
    expect(runs).toBe(2);
    await expect(openHarness(await backends[1]!.create(), { registry, resume: true, readOnly: true })).rejects.toThrow(
      /resume and readOnly/,
    );
  });
});
