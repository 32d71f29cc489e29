/**
 * S12's counter as a two-place scenario (decisions 0101, 0113): a task prints `tick 1..TO`, a step every EVERY_MS (a
 * rest longer than the object's 1 s grace), each step checking memo `printed-n`, writing it, then printing. With
 * `declared` the print is a declared effect (`runtime.beforeEffect` between the memo and the print: it waits for the
 * object's acknowledgement), and the world's `once` counts each tick — the sweep's built-in check then says every tick
 * was printed at most once over both places. The tab leaves once it printed LEAVE_AT, and goes on ticking until its
 * hand-over (or its fence) stops it.
 */
import { createRegistry, BACKGROUND_CONTEXT as ctx, defineExtension, defineTask, Harness, type TaskDefinition } from "../src/index.ts";
import type { CrashWorldView, SweepWorld } from "../src/testing/index.ts";
import type { Place, TwoPlaceScenario } from "../src/testing/two-places/sweep.ts";

const TO = 5;
const LEAVE_AT = 2;
const EVERY_MS = 1_500;

interface CounterState {
  leave?: boolean;
  /** Every tick printed, by which place and when (the world's clock). */
  prints: Array<{ place: Place; n: number; at: number }>;
  /** With `workerStaysAlive`: the tab may print nothing from then on (decision 0113). */
  endsBy?: number;
}

type Checkpoint = { phase: "tick"; n: number };

function counter(place: Place, world: SweepWorld<CounterState>, declared: boolean): TaskDefinition<{ to: number }, Checkpoint, string> {
  return defineTask<{ to: number }, Checkpoint, string>({
    name: "sweep.counter",
    version: 1,
    initial: () => ({ phase: "tick", n: 1 }),
    phases: {
      tick: async (task, runtime, context) => {
        const n = task.state.checkpoint.n;
        if ((await runtime.memo(`printed-${n}`, context)) === undefined) {
          await runtime.memo(`printed-${n}`, true, context);
          if (declared) await runtime.beforeEffect(context);
          if (declared) world.once(`tick ${n}`);
          world.log(`${place} tick ${n}`);
          world.state.prints.push({ place, n, at: runtime.now() });
          if (place === "tab" && n === LEAVE_AT) world.state.leave = true;
        }
        if (n === task.input.to) {
          await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: `counted to ${n}` } }), context);
          return;
        }
        await runtime.sleepUntil(runtime.now() + EVERY_MS, { phase: "tick", n: n + 1 }, context);
      },
    },
    abort: async (_task, runtime, context) => {
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted", reason: "aborted by request" } }), context);
    },
  });
}

/** Where the count ended: finished at the holder, or (a tab that crashed before its counter reached the object) never begun there. */
async function counted({ storage }: CrashWorldView<CounterState>): Promise<string | undefined> {
  const [task] = await storage.listTasks();
  if (task === undefined) return undefined; // the tab's whole stretch is its fork, judged by the sweep's verdict
  if (task.state.status !== "terminal" || (task.state.outcome as { result?: unknown }).result !== `counted to ${TO}`)
    return `the counter ended ${JSON.stringify(task.state)}`;
}

/** One place at a time: no tab print after any of the object's; each place's ticks in order. */
function onePlaceAtATime({ state }: CrashWorldView<CounterState>): string | undefined {
  const firstObject = state.prints.findIndex((p) => p.place === "object");
  const said = state.prints.map((p) => `${p.place} tick ${p.n} at ${p.at}`).join(", ");
  if (firstObject >= 0 && state.prints.slice(firstObject).some((p) => p.place === "tab"))
    return `the tab printed after the object: ${said}`;
  for (const place of ["tab", "object"] as const) {
    const ticks = state.prints.filter((p) => p.place === place).map((p) => p.n);
    if (ticks.some((n, i) => i > 0 && n <= ticks[i - 1]!)) return `the ${place}'s ticks out of order: ${said}`;
  }
  if (state.endsBy !== undefined && state.prints.some((p) => p.place === "tab" && p.at >= state.endsBy!))
    return `the tab printed after its page's grace (its lease ended by ${state.endsBy}): ${said}`;
  return undefined;
}

/** The counter in a tab that leaves after LEAVE_AT; `declared`: its print waits for the object's acknowledgement. */
export function counterTurn(declared: boolean): TwoPlaceScenario<CounterState> {
  return {
    name: `a counter whose print is ${declared ? "a declared effect" : "not declared"}`,
    world: () => ({ prints: [] }),
    open: (place, storage, clock, lease, world) =>
      Harness.open(
        storage,
        { registry: createRegistry().install(defineExtension({ name: "sweep", tasks: [counter(place, world, declared)] })), clock, lease },
        ctx,
      ),
    start: async (harness, world) => {
      const root = await harness.root(ctx);
      if ((await harness.storage.listTasks()).length === 0)
        await root.commit((tx) => tx.createTask(counter("tab", world, declared), { to: TO }), ctx);
    },
    leaveWhen: (harness, world) => world.state.leave === true || harness.quiet,
    leftAt: (world, endsBy) => {
      world.state.endsBy = endsBy;
    },
    invariants: [counted, onePlaceAtATime],
  };
}
