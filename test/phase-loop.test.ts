import { describe, expect, it } from "vitest";
import { createRegistry, defineExtension, defineTask, type TaskDefinition } from "../src/index.ts";
import { backends, ctx, openHarness } from "./support.ts";

// Decision 0087: a run invocation's phase loop is a small state machine (`then` with two reactions made once), not
// an `await` in an async loop. These are the shapes of phase the async loop took, each ending as it did: a phase
// that throws before it returns, one that returns its commit's promise without being async, one that returns a
// thenable, one whose promise rejects after its commit was stored, and one stepping many times.

function registryWith(...tasks: TaskDefinition<any, any, any>[]) {
  return createRegistry().install(defineExtension({ name: "test", tasks }));
}

const done = (result: string) => ({ status: "terminal" as const, outcome: { status: "completed" as const, result } });

describe.each(backends)("the phase loop ($name, decision 0087)", (backend) => {
  it("S2: a phase that throws before it returns ends its task faulted (phase_failed) once, and is not run again", async () => {
    let calls = 0;
    const thrower = defineTask<null, { phase: "boom" }, string>({
      name: "test.sync-thrower",
      version: 1,
      initial: () => ({ phase: "boom" }),
      phases: {
        boom: (() => {
          calls++;
          throw new Error("at once");
        }) as never,
      },
      abort: async () => {},
    });
    const { harness, reports } = await openHarness(await backend.create(), { registry: registryWith(thrower) });
    const root = await harness.root(ctx);
    const id = await root.commit((tx) => tx.createTask(thrower, null), ctx);
    const end = await harness.waitForTask(id, ctx);
    expect(end.state).toEqual({ status: "terminal", outcome: { status: "faulted", error: { message: "at once" } } });
    expect(calls).toBe(1);
    expect(reports.filter((report) => report.kind === "task_faulted")).toEqual([
      expect.objectContaining({ taskId: id, reason: "phase_failed", message: "at once" }),
    ]);
    await harness.close(ctx);
  });

  it("S1/S2: phases that return their commit's promise without being async, or a thenable, step on as awaited ones do", async () => {
    const plain = defineTask<null, { phase: "a" | "b" }, string>({
      name: "test.plain",
      version: 1,
      initial: () => ({ phase: "a" }),
      phases: {
        // Not async: the commit's own promise is what the loop follows.
        a: ((_t: unknown, runtime: any, context: any) =>
          runtime.commit(() => ({ status: "running", checkpoint: { phase: "b" } }), context)) as never,
        // A thenable that is not a Promise: followed as `await` follows one.
        b: ((_t: unknown, runtime: any, context: any) => ({
          // biome-ignore lint/suspicious/noThenProperty: the thenable this test needs
          then: (resolve: () => void, reject: (error: unknown) => void) => runtime.commit(() => done("b"), context).then(resolve, reject),
        })) as never,
      },
      abort: async () => {},
    });
    const { harness, reports } = await openHarness(await backend.create(), { registry: registryWith(plain) });
    const root = await harness.root(ctx);
    const id = await root.commit((tx) => tx.createTask(plain, null), ctx);
    expect((await harness.waitForTask(id, ctx)).state).toEqual(done("b"));
    expect(reports.filter((report) => report.kind === "task_faulted")).toEqual([]);
    await harness.close(ctx);
  });

  it("S2: a phase whose promise rejects after its progress was stored ends faulted (phase_failed), not stepped on", async () => {
    let seconds = 0;
    const late = defineTask<null, { phase: "first" | "second" }, string>({
      name: "test.late-thrower",
      version: 1,
      initial: () => ({ phase: "first" }),
      phases: {
        first: async (_t, runtime, context) => {
          await runtime.commit(() => ({ status: "running", checkpoint: { phase: "second" } }), context);
          throw new Error("after the commit");
        },
        second: async () => {
          seconds++;
        },
      },
      abort: async () => {},
    });
    const { harness } = await openHarness(await backend.create(), { registry: registryWith(late) });
    const root = await harness.root(ctx);
    const id = await root.commit((tx) => tx.createTask(late, null), ctx);
    const end = await harness.waitForTask(id, ctx);
    expect(end.state).toEqual({ status: "terminal", outcome: { status: "faulted", error: { message: "after the commit" } } });
    expect(seconds).toBe(0);
    await harness.close(ctx);
  });

  it("S1/S8: parallel tasks of many steps each run every step once, in order, and complete", async () => {
    const seen = new Map<number, number[]>();
    const counter = defineTask<{ steps: number }, { phase: "step"; n: number }, number>({
      name: "test.counter-steps",
      version: 1,
      initial: () => ({ phase: "step", n: 0 }),
      phases: {
        step: async (task, runtime, context) => {
          const n = task.state.checkpoint.n + 1;
          seen.set(task.id, [...(seen.get(task.id) ?? []), n]);
          await runtime.commit(
            () =>
              n >= task.input.steps
                ? { status: "terminal", outcome: { status: "completed", result: n } }
                : { status: "running", checkpoint: { phase: "step", n } },
            context,
          );
        },
      },
      abort: async () => {},
    });
    const { harness, reports } = await openHarness(await backend.create(), { registry: registryWith(counter) });
    const root = await harness.root(ctx);
    const ids = await root.commit((tx) => Array.from({ length: 20 }, () => tx.createTask(counter, { steps: 12 })), ctx);
    const ends = await Promise.all(ids.map((id) => harness.waitForTask(id, ctx)));
    for (const end of ends) expect(end.state).toEqual({ status: "terminal", outcome: { status: "completed", result: 12 } });
    for (const id of ids) expect(seen.get(id)).toEqual(Array.from({ length: 12 }, (_, index) => index + 1));
    expect(reports.filter((report) => report.kind === "task_faulted" || report.kind === "error")).toEqual([]);
    await harness.close(ctx);
  });
});
