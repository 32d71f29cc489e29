// The peer's bench page: @coji/durably with its documented browser setup (docs/llms.md, "Browser Usage":
// SQLocalKysely on OPFS, pollingIntervalMs 100, leaseRenewIntervalMs 500, leaseMs 3000), running the same
// job as ours: N sequential steps, each returning a small JSON result. Plain JavaScript on purpose: the
// peer's packages live in bench/node_modules (installed by `npm run bench`), so the main typecheck must not
// depend on them.
//
// Every time is performance.now() on this page: ms since this document's navigation started.
import { createDurably, defineJob } from "@coji/durably";
import { SQLocalKysely } from "sqlocal/kysely";
import { z } from "zod";

const params = new URLSearchParams(location.search);
const bench = {
  scriptStart: performance.now(),
  ready: false,
  initDone: undefined,
  /** First `run:leased` on this page. */
  leasedAt: undefined,
  /** step name → when its `step:complete` fired (after the step's row committed). */
  steps: {},
  /** Set when the armed step has done its side effect and hangs (the reload comes next). */
  cutReached: undefined,
  completed: {},
  error: undefined,
};
window.bench = bench;

/** The step at which the job hangs after its side effect, armed only on the page that started the job. */
let cutAt;
const completions = new Map();

const seq = defineJob({
  name: "seq",
  input: z.object({ steps: z.number(), effects: z.string().optional() }),
  run: async (step, input) => {
    let sum = 0;
    for (let i = 1; i <= input.steps; i++) {
      const result = await step.run(`s${i}`, async () => {
        if (input.effects) {
          // The side effect survives the reload: a synchronous localStorage write on this page.
          const key = `fx:${input.effects}:${i}`;
          localStorage.setItem(key, String(Number(localStorage.getItem(key) ?? 0) + 1));
          if (cutAt === i) {
            bench.cutReached = performance.now();
            await new Promise(() => {});
          }
        }
        return { i };
      });
      sum += result.i;
    }
    return { sum };
  },
});

const { dialect } = new SQLocalKysely(params.get("db") ?? "bench.sqlite3");
const durably = createDurably({
  dialect,
  pollingIntervalMs: 100,
  leaseRenewIntervalMs: 500,
  leaseMs: 3000,
  jobs: { seq },
});

durably.on("step:complete", (event) => {
  bench.steps[event.stepName] ??= performance.now();
});
durably.on("run:leased", () => {
  bench.leasedAt ??= performance.now();
});
durably.on("run:complete", (event) => {
  bench.completed[event.runId] = performance.now();
  completions.get(event.runId)?.();
});

function completion(runId) {
  if (bench.completed[runId] !== undefined) return Promise.resolve();
  return new Promise((resolve) => completions.set(runId, resolve));
}

/** One job of `steps` steps: ms from trigger() to its run:complete. */
bench.run = async (steps) => {
  const started = performance.now();
  const run = await durably.jobs.seq.trigger({ steps });
  await completion(run.id);
  return performance.now() - started;
};

/** Starts a job with side effects that hangs in step `cut` after its side effect (then Node reloads). */
bench.startCut = async (steps, tag, cut) => {
  cutAt = cut;
  const run = await durably.jobs.seq.trigger({ steps, effects: tag });
  return run.id;
};

/** How many times each step's side effect ran (index = step; index 0 unused). */
bench.effects = (tag, steps) => {
  const counts = [0];
  for (let i = 1; i <= steps; i++) counts.push(Number(localStorage.getItem(`fx:${tag}:${i}`) ?? 0));
  return counts;
};

try {
  await durably.init();
  bench.initDone = performance.now();
  bench.ready = true;
  bench.crossOriginIsolated = globalThis.crossOriginIsolated;
} catch (error) {
  bench.error = String(error?.stack ?? error);
}
