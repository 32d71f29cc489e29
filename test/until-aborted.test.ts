import { afterEach, describe, expect, it } from "vitest";
import { createRegistry, defineExtension, defineTask } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { ctx, openHarness, runUntil } from "./support.ts";

/** Counts `new AbortController()` while installed (a subclass stands in for the global). */
const Original = globalThis.AbortController;
let made = 0;
class CountingController extends Original {
  constructor() {
    super();
    made += 1;
  }
}
afterEach(() => {
  globalThis.AbortController = Original;
});

const COUNT = 50;
const held: number[] = [];
const released: number[] = [];
const holder = defineTask<null, { phase: "hold" }, null>({
  name: "test.holder",
  version: 1,
  initial: () => ({ phase: "hold" }),
  phases: {
    hold: async (task, runtime) => {
      held.push(task.id);
      await runtime.untilAborted();
      // A second call is the same promise, already resolved.
      await runtime.untilAborted();
      released.push(task.id);
    },
  },
  abort: async (_task, runtime, context) => runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context),
});
const registry = () => createRegistry().install(defineExtension({ name: "test", tasks: [holder] }));

describe("runtime.untilAborted (decision 0050)", () => {
  it("S4: a phase held on untilAborted is released by an abort mark and by close, with no AbortController made per task", async () => {
    held.length = 0;
    released.length = 0;
    const storage = await openSqliteStorage({ vfs: "memory" });
    const { harness, clock } = await openHarness(storage, { registry: registry() });
    const root = await harness.root(ctx);
    await root.commit((tx) => {
      for (let index = 0; index < COUNT; index++) tx.createTask(holder, null);
    }, ctx);
    made = 0;
    globalThis.AbortController = CountingController;
    harness.resume();
    await runUntil(clock, () => held.length === COUNT);
    // The held tasks made no signal: far fewer controllers than tasks (none, today).
    expect(made).toBeLessThan(COUNT);
    globalThis.AbortController = Original;

    // An abort mark releases its task's phase; the task ends aborted by its abort handler.
    const first = held[0]!;
    await harness.abortTask(first, ctx);
    await runUntil(clock, async () => (await harness.query(`SELECT status FROM tasks WHERE id = ${first}`))[0]!.status === "terminal");
    expect(released).toContain(first);

    // close releases every other held phase and parks each task pending (S4), restarts unchanged.
    await harness.close(ctx);
    expect(new Set(released)).toEqual(new Set(held));
    const rows = await storage.database.all("SELECT status, record ->> '$.restarts' AS restarts FROM tasks WHERE id <> ?", first);
    expect(rows).toHaveLength(COUNT - 1);
    expect(rows.every((row) => row.status === "pending")).toBe(true);
  });
});
