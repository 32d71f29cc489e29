import { describe, expect, it } from "vitest";
import {
  createRegistry,
  DatabaseLocked,
  defineExtension,
  defineTask,
  Harness,
  InvalidCommit,
  InvalidSetting,
  MemoryStorage,
  type Storage,
  type TaskDefinition,
  type TaskRecord,
} from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { backends, ctx, flush, never, openHarness, runUntil } from "./support.ts";

// The corners a commit-by-commit crash sweep found (issue 9, B1–B8 and the settings/close items).

function registryWith(...tasks: TaskDefinition<any, any, any>[]) {
  return createRegistry().install(defineExtension({ name: "test", tasks }));
}

const aborted = async (_t: unknown, runtime: any, context: any) =>
  runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted", reason: "asked" } }), context);

const napper = defineTask<{ ms: number }, { phase: "nap" | "woke" }, string>({
  name: "test.napper",
  version: 1,
  initial: () => ({ phase: "nap" }),
  phases: {
    nap: async (task, runtime, context) => runtime.sleepUntil(runtime.now() + task.input.ms, { phase: "woke" }, context),
    woke: async (_t, runtime, context) =>
      runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "woke" } }), context),
  },
  abort: aborted,
});

async function status(harness: Harness, id: number): Promise<TaskRecord> {
  return (await harness.getTask(id, ctx))!;
}

/** Lets queued work run (the clock stays put) until the task is terminal, or gives up after `rounds`. */
async function settleUntilTerminal(harness: Harness, id: number, rounds = 400): Promise<void> {
  for (let i = 0; i < rounds && (await status(harness, id)).state.status !== "terminal"; i++) await flush(1);
}

/**
 * A crash loop: six times the harness resumes, runs until the task's handler (or phase) started or the task ended,
 * and the process dies there (the next open is on the image as it was). Returns the harness opened after the last.
 */
async function crashSixTimes(
  backend: (typeof backends)[number],
  opened: Awaited<ReturnType<typeof openHarness>>,
  storage: Storage,
  id: number,
  reopen: (storage: Storage) => ReturnType<typeof openHarness>,
): Promise<Awaited<ReturnType<typeof openHarness>>> {
  for (let round = 0; round < 6; round++) {
    opened.harness.resume();
    // Until the handler (or the phase) runs, or the task ended: then the process dies.
    for (let i = 0; i < 400 && !["running", "terminal"].includes((await storage.getTask(id))!.state.status); i++) await flush(1);
    await flush(2);
    storage = await backend.fromImage(await storage.exportImage());
    opened = await reopen(storage);
  }
  return opened;
}

for (const backend of backends) {
  describe(`kernel corners on ${backend.name}`, () => {
    it("S3/B1: abortTask on a sleeping task runs its abort handler now, not when the sleep ends", async () => {
      const registry = registryWith(napper);
      const { harness, clock } = await openHarness(await backend.create(), { registry });
      const root = await harness.root(ctx);
      const id = await root.commit((tx) => tx.createTask(napper, { ms: 3_600_000 }), ctx);
      harness.resume();
      await runUntil(clock, async () => (await status(harness, id)).state.status === "sleeping");
      await harness.abortTask(id, ctx);
      await settleUntilTerminal(harness, id); // no clock movement
      const record = await status(harness, id);
      expect(record.state).toMatchObject({ status: "terminal", outcome: { status: "aborted" } });
    });

    it("S3/B1: a cascade marks a sleeping child, whose abort runs now and frees its owner", async () => {
      const parent = defineTask<null, { phase: "spawn" | "joined" }, string>({
        name: "test.parent",
        version: 1,
        initial: () => ({ phase: "spawn" }),
        phases: {
          spawn: async (_t, runtime, context) =>
            runtime.commit((tx) => {
              const child = tx.createTask(napper, { ms: 3_600_000 });
              return { status: "waiting", checkpoint: { phase: "joined" }, on: [child] };
            }, context),
          joined: async () => void (await never()),
        },
        abort: aborted,
      });
      const registry = registryWith(napper, parent);
      const { harness, clock } = await openHarness(await backend.create(), { registry });
      const root = await harness.root(ctx);
      const id = await root.commit((tx) => tx.createTask(parent, null), ctx);
      harness.resume();
      await runUntil(clock, async () => (await harness.inspect(ctx)).tasks.some((t) => t.record.state.status === "sleeping"));
      await harness.abortTask(id, ctx);
      await settleUntilTerminal(harness, id);
      expect((await status(harness, id)).state).toMatchObject({ status: "terminal", outcome: { status: "aborted" } });
      expect((await harness.inspect(ctx)).tasks).toEqual([]);
    });

    it("S2/B2: a phase that throws a cyclic object or a BigInt ends faulted once (no retake loop)", async () => {
      let runs = 0;
      const thrower = defineTask<{ bigint: boolean }, { phase: "go" }, string>({
        name: "test.thrower",
        version: 1,
        initial: () => ({ phase: "go" }),
        phases: {
          go: async (task) => {
            runs++;
            if (task.input.bigint) throw 10n;
            const cyclic: Record<string, unknown> = { what: "cyclic" };
            cyclic.self = cyclic;
            throw cyclic;
          },
        },
        abort: aborted,
      });
      const registry = registryWith(thrower);
      const { harness, reports } = await openHarness(await backend.create(), { registry });
      const root = await harness.root(ctx);
      const ids = await root.commit((tx) => [tx.createTask(thrower, { bigint: false }), tx.createTask(thrower, { bigint: true })], ctx);
      harness.resume();
      for (const id of ids) await settleUntilTerminal(harness, id);
      await flush(10);
      expect(runs).toBe(2);
      for (const id of ids) {
        const record = await status(harness, id);
        expect(record.state).toMatchObject({ status: "terminal", outcome: { status: "faulted" } });
      }
      const messages = reports.filter((r) => r.kind === "task_faulted").map((r) => (r as { message: string }).message);
      expect(messages).toHaveLength(2);
      expect(messages[1]).toContain("10");
    });

    it("S6/B6: the restart limit also ends a crash loop inside an abort handler", async () => {
      let aborts = 0;
      const stuck = defineTask<null, { phase: "go" }, string>({
        name: "test.stuck",
        version: 1,
        initial: () => ({ phase: "go" }),
        phases: { go: async () => void (await never()) },
        abort: async () => {
          aborts++;
          await never(); // the process dies inside the abort handler, every time
        },
      });
      const registry = registryWith(stuck);
      const storage: Storage = await backend.create();
      const reopen = (next: Storage) => openHarness(next, { registry, settings: { restartLimit: 2 } });
      let opened = await reopen(storage);
      const root = await opened.harness.root(ctx);
      const id = await root.commit((tx) => tx.createTask(stuck, null), ctx);
      await opened.harness.abortTask(id, ctx);
      opened = await crashSixTimes(backend, opened, storage, id, reopen);
      opened.harness.resume();
      await settleUntilTerminal(opened.harness, id);
      expect(aborts).toBeLessThanOrEqual(3);
      const record = await status(opened.harness, id);
      expect(record.state).toMatchObject({
        status: "terminal",
        outcome: { status: "faulted", error: { detail: { reason: "restart_limit" } } },
      });
    });

    it("S6/B6: the restart limit also ends a crash loop inside onRestartLimit", async () => {
      let handlers = 0;
      const stuck = defineTask<null, { phase: "go" }, string>({
        name: "test.stuck",
        version: 1,
        initial: () => ({ phase: "go" }),
        phases: { go: async () => void (await never()) },
        abort: aborted,
        onRestartLimit: async () => {
          handlers++;
          await never();
        },
      });
      const registry = registryWith(stuck);
      const storage: Storage = await backend.create();
      const reopen = (next: Storage) => openHarness(next, { registry, settings: { restartLimit: 1 } });
      let opened = await reopen(storage);
      const root = await opened.harness.root(ctx);
      const id = await root.commit((tx) => tx.createTask(stuck, null), ctx);
      opened = await crashSixTimes(backend, opened, storage, id, reopen);
      opened.harness.resume();
      await settleUntilTerminal(opened.harness, id);
      expect(handlers).toBeLessThanOrEqual(2);
      expect((await status(opened.harness, id)).state).toMatchObject({ status: "terminal", outcome: { status: "faulted" } });
    });

    it("S3/B7: failFast holds when a member failed before the wait was committed", async () => {
      const failing = defineTask<null, { phase: "go" }, string>({
        name: "test.failing",
        version: 1,
        initial: () => ({ phase: "go" }),
        phases: {
          go: async (_t, runtime, context) =>
            runtime.commit(() => ({ status: "terminal", outcome: { status: "failed", error: { message: "no" } } }), context),
        },
        abort: aborted,
      });
      const group = defineTask<null, { phase: "spawn" | "park" | "joined"; on?: number[] }, string>({
        name: "test.group",
        version: 1,
        initial: () => ({ phase: "spawn" }),
        phases: {
          spawn: async (_t, runtime, context) =>
            runtime.commit((tx) => {
              const on = [tx.createTask(failing, null), tx.createTask(napper, { ms: 3_600_000 })];
              return { status: "running", checkpoint: { phase: "park", on } };
            }, context),
          park: async (task, runtime, context) => {
            const on = task.state.checkpoint.on!;
            // Let the failing member end before the wait is committed.
            for (let i = 0; i < 50 && (await runtime.getTask(on[0]!, context))?.state.status !== "terminal"; i++)
              await new Promise((r) => setTimeout(r, 0));
            await runtime.commit(() => ({ status: "waiting", checkpoint: { phase: "joined" }, on, policy: "failFast" }), context);
          },
          joined: async (_t, runtime, context) =>
            runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "joined" } }), context),
        },
        abort: aborted,
      });
      const registry = registryWith(failing, napper, group);
      const { harness, clock } = await openHarness(await backend.create(), { registry });
      const root = await harness.root(ctx);
      const id = await root.commit((tx) => tx.createTask(group, null), ctx);
      harness.resume();
      await settleUntilTerminal(harness, id);
      // The sleeping member was marked by failFast and aborted without the clock moving an hour.
      expect((await status(harness, id)).state).toMatchObject({ status: "terminal", outcome: { status: "completed" } });
      expect(clock.now()).toBe(1_000);
    });

    it("S4/B7: failFast holds across a crash between a member's failure and the pass that marks the others", async () => {
      const failing = defineTask<null, { phase: "go" }, string>({
        name: "test.failing",
        version: 1,
        initial: () => ({ phase: "go" }),
        phases: {
          go: async (_t, runtime, context) =>
            runtime.commit(() => ({ status: "terminal", outcome: { status: "failed", error: { message: "no" } } }), context),
        },
        abort: aborted,
      });
      const group = defineTask<null, { phase: "spawn" | "joined" }, string>({
        name: "test.group",
        version: 1,
        initial: () => ({ phase: "spawn" }),
        phases: {
          spawn: async (_t, runtime, context) =>
            runtime.commit((tx) => {
              const on = [tx.createTask(failing, null), tx.createTask(napper, { ms: 3_600_000 })];
              return { status: "waiting", checkpoint: { phase: "joined" }, on, policy: "failFast" };
            }, context),
          joined: async (_t, runtime, context) =>
            runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "joined" } }), context),
        },
        abort: aborted,
      });
      const registry = registryWith(failing, napper, group);
      const storage = await backend.create();
      let image: Uint8Array | undefined;
      const { harness } = await openHarness(storage, {
        registry,
        crashPoint: async (name, at) => {
          if (name === "task:after-commit" && at.taskKind === "test.failing" && !image) {
            image = await storage.exportImage();
            await never();
          }
        },
      });
      const root = await harness.root(ctx);
      const id = await root.commit((tx) => tx.createTask(group, null), ctx);
      harness.resume();
      await flush(30);
      expect(image).toBeDefined();
      const reopened = await openHarness(await backend.fromImage(image!), { registry });
      reopened.harness.resume();
      await settleUntilTerminal(reopened.harness, id);
      expect((await status(reopened.harness, id)).state).toMatchObject({ status: "terminal", outcome: { status: "completed" } });
      expect(reopened.clock.now()).toBe(1_000);
    });

    it("S3/B8: an abort-marked task past its wake time that waits for owned work arms no 0 ms timer loop", async () => {
      const holder = defineTask<null, { phase: "hold" }, string>({
        name: "test.holder",
        version: 1,
        initial: () => ({ phase: "hold" }),
        phases: { hold: async () => void (await never()) },
        abort: async () => void (await never()), // its abort never ends: the owner keeps waiting for it
      });
      const owner = defineTask<null, { phase: "spawn" | "woke" }, string>({
        name: "test.owner",
        version: 1,
        initial: () => ({ phase: "spawn" }),
        phases: {
          spawn: async (_t, runtime, context) =>
            runtime.commit((tx) => {
              tx.createTask(holder, null);
              return { status: "sleeping", until: runtime.now() + 10, checkpoint: { phase: "woke" } };
            }, context),
          woke: async () => void (await never()),
        },
        abort: aborted,
      });
      const registry = registryWith(holder, owner);
      const { harness, clock } = await openHarness(await backend.create(), { registry });
      const root = await harness.root(ctx);
      const id = await root.commit((tx) => tx.createTask(owner, null), ctx);
      harness.resume();
      await flush(10);
      await harness.abortTask(id, ctx);
      clock.advance(100);
      await flush(10);
      // Past its wake time, abort-marked, its child still live: nothing to do until the child ends.
      let fired = 0;
      while (clock.next() && fired < 50) {
        fired++;
        await flush(2);
      }
      expect(fired).toBeLessThan(50);
      expect(clock.pending).toBe(0);
    });

    it("S4/B5: a second Harness.open on a storage a live harness holds is refused, also while its close() waits", async () => {
      let release!: () => void;
      const slow = defineTask<null, { phase: "go" }, string>({
        name: "test.slow",
        version: 1,
        initial: () => ({ phase: "go" }),
        phases: {
          go: async (_t, runtime, context) => {
            await new Promise<void>((resolve) => (release = resolve));
            await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "ok" } }), context).catch(() => {});
          },
        },
        abort: aborted,
      });
      const registry = registryWith(slow);
      const storage = await backend.create();
      const { harness } = await openHarness(storage, { registry });
      await expect(openHarness(storage, { registry })).rejects.toBeInstanceOf(DatabaseLocked);
      const root = await harness.root(ctx);
      await root.commit((tx) => tx.createTask(slow, null), ctx);
      harness.resume();
      await flush(5);
      const closing = harness.close(ctx);
      await flush(5);
      await expect(openHarness(storage, { registry })).rejects.toBeInstanceOf(DatabaseLocked);
      release();
      await closing;
      const second = await openHarness(storage, { registry });
      expect(second.harness.closed).toBe(false);
      // A read-only harness may look at it meanwhile.
      const reader = await openHarness(storage, { registry, readOnly: true });
      expect(reader.harness.readOnly).toBe(true);
    });
  });
}

describe("kernel corners (storage independent)", () => {
  it("S3/B3: a live row without a checkpoint or with an unknown status is refused at open as DatabaseCorrupt", async () => {
    const registry = createRegistry();
    for (const state of [
      { status: "running" },
      { status: "dancing", checkpoint: { phase: "x" } },
      // A sleep without `until` is a wait for a commit (DESIGN §4c); one until a time that is no time is damaged.
      { status: "sleeping", checkpoint: { phase: "x" }, until: "soon" },
    ]) {
      const storage = new MemoryStorage();
      await storage.apply({
        tasks: [
          {
            id: 1,
            conversationId: 2,
            kind: "test.x",
            version: 1,
            input: null,
            background: false,
            abortRequested: false,
            state,
          } as unknown as TaskRecord,
        ],
        conversations: [{ id: 2, createdAt: 0 }],
        entries: [],
        submissions: [],
        documents: [],
        nextId: 3,
      });
      const before = new TextDecoder().decode(await storage.exportImage());
      await expect(Harness.open(storage, { registry }, ctx)).rejects.toMatchObject({
        name: "DatabaseCorrupt",
        message: expect.stringContaining("task 1"),
      });
      expect(new TextDecoder().decode(await storage.exportImage())).toBe(before);
      // Read-only still opens it for inspection.
      const reader = await Harness.open(storage, { registry, readOnly: true }, ctx);
      expect(reader.readOnly).toBe(true);
    }
  });

  it("S6/settings: InvalidSetting names NaN and Infinity as such and rejects unknown or mistyped keys", async () => {
    const registry = createRegistry();
    const open = (settings: unknown) => Harness.open(new MemoryStorage(), { registry, settings: settings as never }, ctx);
    await expect(open({ restartLimit: NaN })).rejects.toThrow(/got NaN/);
    await expect(open({ progress: { persistWithinMs: Infinity } })).rejects.toThrow(/got Infinity/);
    await expect(open({ retry: { baseDelayMs: -Infinity } })).rejects.toThrow(/got -Infinity/);
    await expect(open({ retry: 5 })).rejects.toBeInstanceOf(InvalidSetting);
    await expect(open({ progress: 5 })).rejects.toBeInstanceOf(InvalidSetting);
    await expect(open({ restartLimt: 3 })).rejects.toThrow(/restartLimt/);
    await expect(open({ retry: { maxRetrys: 1 } })).rejects.toThrow(/maxRetrys/);
    await expect(open({ progress: { persistWithin: 1 } })).rejects.toThrow(/persistWithin/);
    await expect(open({ restartLimit: 3, retry: { maxRetries: 0 } })).resolves.toBeInstanceOf(Harness);
  });

  it("S3/async change: an async change callback is refused with an InvalidCommit that says to make it synchronous", async () => {
    let failure: unknown;
    const asyncChange = defineTask<null, { phase: "go" }, string>({
      name: "test.async",
      version: 1,
      initial: () => ({ phase: "go" }),
      phases: {
        go: async (_t, runtime, context) => {
          try {
            await runtime.commit((async () => ({ status: "terminal", outcome: { status: "completed", result: "x" } })) as never, context);
          } catch (error) {
            failure = error;
          }
          await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "ok" } }), context);
        },
      },
      abort: aborted,
    });
    const { harness } = await openHarness(new MemoryStorage(), { registry: registryWith(asyncChange) });
    const root = await harness.root(ctx);
    const id = await root.commit((tx) => tx.createTask(asyncChange, null), ctx);
    await harness.waitForTask(id, ctx);
    expect(failure).toBeInstanceOf(InvalidCommit);
    expect(String((failure as Error).message)).toMatch(/synchronous/);
  });

  it("S4/close bound: close() gives up on a phase that ignores its signal after closeTimeoutMs; the task stays running, as after a crash", async () => {
    const deaf = defineTask<null, { phase: "go" }, string>({
      name: "test.deaf",
      version: 1,
      initial: () => ({ phase: "go" }),
      phases: { go: async () => void (await never()) },
      abort: aborted,
    });
    const registry = registryWith(deaf);
    const storage = new MemoryStorage();
    const clock = createManualClock(1_000);
    const { harness, reports } = await openHarness(storage, { registry, clock, settings: { closeTimeoutMs: 5_000 } });
    const root = await harness.root(ctx);
    const id = await root.commit((tx) => tx.createTask(deaf, null), ctx);
    harness.resume();
    await flush(5);
    let closed = false;
    const closing = harness.close(ctx).then(() => (closed = true));
    await flush(5);
    expect(closed).toBe(false);
    clock.advance(4_999);
    await flush(5);
    expect(closed).toBe(false);
    clock.advance(1);
    await closing;
    expect((await storage.getTask(id))!.state.status).toBe("running");
    expect(reports.some((r) => r.kind === "error" && String((r as { error: Error }).error.message).includes("closeTimeoutMs"))).toBe(true);
    const next = await openHarness(storage, { registry });
    expect((await next.harness.getTask(id, ctx))!.restarts).toBe(1);
  });
});
