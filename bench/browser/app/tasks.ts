/**
 * The tasks the browser benchmarks run, shared by both bench workers.
 *
 * - `bench.stepper`: the Node kernel benchmark's task (bench/kernel.ts), same record shape: one checkpoint
 *   commit per step, nothing else. Measures the kernel's cost per step against a raw commit.
 * - `bench.hot`: steps forever; the task a reload cuts in the recovery benchmark.
 * - `bench.idle`: goes to sleep for a year; the live tasks that recovery must load but not run.
 * - `bench.stall`: holds its invocation without committing; the live tasks a crash leaves `running`.
 * - `bench.job`: the job run against the peer: N sequential steps, each committing a small JSON result;
 *   with `effects`, each step memos and then performs a side effect that survives the reload.
 */
import { defineExtension, defineTask } from "../../../src/index.ts";

/** Where a step's commit is announced; the page timestamps nothing itself, the worker does. */
export interface StepMark {
  taskId: number;
  kind: string;
  /** The step that committed (checkpoint index before the step). */
  step: number;
  /** `performance.timeOrigin + performance.now()` in the worker, right after the commit resolved. */
  at: number;
  /** How many `bench.stall` phases this worker had begun by then (decision 0105: started in front of the step). */
  stallsBefore: number;
}

let firstStep: StepMark | undefined;
let hotPhaseMarked = false;
let stallsBegun = 0;
const channel = typeof BroadcastChannel === "function" ? new BroadcastChannel("pi-bench") : undefined;

/** The first step this worker committed (the resumed step, after a reload). */
export function firstCommittedStep(): StepMark | undefined {
  return firstStep;
}

function stepCommitted(taskId: number, kind: string, step: number): void {
  if (firstStep) return;
  performance.mark("hot:committed");
  firstStep = { taskId, kind, step, at: performance.timeOrigin + performance.now(), stallsBefore: stallsBegun };
  channel?.postMessage({ type: "first-step", ...firstStep });
}

import { stepper } from "../../stepper.ts";

export { stepper };

export const hot = defineTask<Record<string, never>, { phase: "step"; n: number }, number>({
  name: "bench.hot",
  version: 1,
  initial: () => ({ phase: "step", n: 0 }),
  phases: {
    step: async (task, runtime, context) => {
      if (!hotPhaseMarked) performance.mark("hot:phase"); // the first only: it steps for as long as a bench runs
      hotPhaseMarked = true;
      const n = task.state.checkpoint.n;
      await runtime.commit(() => ({ status: "running", checkpoint: { phase: "step", n: n + 1 } }), context);
      stepCommitted(task.id, task.kind, n);
    },
  },
  abort: async (_task, runtime, context) => runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context),
});

const YEAR_MS = 365 * 24 * 3600 * 1000;

export const idle = defineTask<Record<string, never>, { phase: "sleep" }, null>({
  name: "bench.idle",
  version: 1,
  initial: () => ({ phase: "sleep" }),
  phases: {
    sleep: async (_task, runtime, context) => runtime.sleepUntil(runtime.now() + YEAR_MS, { phase: "sleep" }, context),
  },
  abort: async (_task, runtime, context) => runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context),
});

export const stall = defineTask<Record<string, never>, { phase: "stall" }, null>({
  name: "bench.stall",
  version: 1,
  initial: () => ({ phase: "stall" }),
  phases: {
    stall: async (_task, runtime) => {
      stallsBegun++;
      // Held until stopped, without a signal and listener per task (decision 0050: runtime.untilAborted).
      await runtime.untilAborted();
      throw new Error("stopped");
    },
  },
  abort: async (_task, runtime, context) => runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context),
});

export type JobInput = { steps: number; effects?: string };
export type JobCheckpoint = { phase: "step"; i: number; sum: number; result: { i: number } | null };

export const job = defineTask<JobInput, JobCheckpoint, { sum: number }>({
  name: "bench.job",
  version: 1,
  initial: () => ({ phase: "step", i: 1, sum: 0, result: null }),
  phases: {
    step: async (task, runtime, context) => {
      const { i, sum } = task.state.checkpoint;
      const result = { i };
      const effects = task.input.effects;
      if (effects !== undefined) {
        // Memo before the side effect (S3): a rerun of this step after a crash skips it.
        if ((await runtime.memo(`e${i}`, context)) === undefined) {
          await runtime.memo(`e${i}`, true, context);
          await sideEffect(effects, i);
        }
        await runtime.crashPoint(`bench:after-effect-${i}`);
      }
      await runtime.commit(
        () =>
          i >= task.input.steps
            ? { status: "terminal", outcome: { status: "completed", result: { sum: sum + result.i } } }
            : { status: "running", checkpoint: { phase: "step", i: i + 1, sum: sum + result.i, result } },
        context,
      );
      stepCommitted(task.id, task.kind, i);
    },
  },
  abort: async (_task, runtime, context) => runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context),
});

export const benchExtension = defineExtension({ name: "bench", tasks: [stepper, hot, idle, stall, job] });

// ---------------------------------------------------------------------------------------------------------
// The side effect: one byte per step in an OPFS file, counted up and flushed synchronously, so it survives
// the reload that cuts the step. "readwrite-unsafe" lets the new worker open the file while the old one's
// handle is still being torn down.

type UnsafeHandle = FileSystemSyncAccessHandle;
const effectFiles = new Map<string, Promise<UnsafeHandle>>();

function effectFile(tag: string): Promise<UnsafeHandle> {
  let file = effectFiles.get(tag);
  if (!file) {
    file = (async () => {
      const root = await navigator.storage.getDirectory();
      const handle = await root.getFileHandle(`effects-${tag}.bin`, { create: true });
      return (handle.createSyncAccessHandle as (options: { mode: string }) => Promise<UnsafeHandle>).call(handle, {
        mode: "readwrite-unsafe",
      });
    })();
    effectFiles.set(tag, file);
  }
  return file;
}

async function sideEffect(tag: string, step: number): Promise<void> {
  const file = await effectFile(tag);
  const byte = new Uint8Array(1);
  file.read(byte, { at: step });
  byte[0] = byte[0]! + 1;
  file.write(byte, { at: step });
  file.flush();
}

/** How many times each step's side effect ran (index = step; index 0 unused). */
export async function effectCounts(tag: string, steps: number): Promise<number[]> {
  const file = await effectFile(tag);
  const bytes = new Uint8Array(steps + 1);
  file.read(bytes, { at: 0 });
  return Array.from(bytes);
}
