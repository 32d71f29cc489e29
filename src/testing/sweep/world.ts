import type { AnyTool } from "../../agent/tool.ts";
import { BACKGROUND_CONTEXT } from "../../base/context.ts";
import { CrashSweepViolation } from "../../errors.ts";
import type { Harness } from "../../harness.ts";
import { MemoryStorage } from "../../storage/memory.ts";
import type { Storage } from "../../storage/storage.ts";
import { createManualClock } from "../clock.ts";
import { crashingStorage } from "./crashing-storage.ts";
import { BUILT_IN_CHECKS, REQUESTS, type RequestEvent, requestEvents } from "./invariants.ts";
import {
  type CrashPoint,
  type CrashScenario,
  type CrashSweepOptions,
  type CrashWorldView,
  describeCrash,
  type SweepBackend,
  type SweepWorld,
} from "./types.ts";

/** What a world tells the sweep: how many commits each process made, and the first broken invariant. */
export interface WorldResult {
  commitsPerProcess: number[];
  violation?: CrashSweepViolation;
}

export async function backendOf(storage: CrashSweepOptions["storage"]): Promise<SweepBackend> {
  if (storage === undefined || storage === "memory") {
    return { create: async () => new MemoryStorage(), fromImage: async (image) => MemoryStorage.fromImage(image) };
  }
  if (storage === "sqlite") {
    const { openSqliteStorage } = await import("../../storage/sqlite/open-storage.ts");
    return { create: () => openSqliteStorage({ vfs: "memory" }), fromImage: (image) => openSqliteStorage({ vfs: "memory", image }) };
  }
  return storage;
}

export class Recorder<W> {
  readonly effects = new Map<string, number>();
  readonly lines: string[] = [];
  readonly toolRuns = new Map<string, { replay: "safe" | "unsafe"; runs: number }>();
  readonly log: string[] = [];
  readonly requests: RequestEvent[] = [];
  process = 1;
  readonly state: W;

  constructor(state: W) {
    this.state = state;
  }

  view(): SweepWorld<W> {
    const recorder = this;
    const process = this.process;
    return {
      state: this.state,
      process,
      once: (key) => void this.effects.set(key, (this.effects.get(key) ?? 0) + 1),
      log: (line) => void this.lines.push(line),
      track<T extends AnyTool>(tool: T): T {
        return Object.freeze({
          ...tool,
          execute(args: unknown, api: { callId: string }, context: unknown) {
            const key = `${tool.name}:${api.callId}`;
            const runs = recorder.toolRuns.get(key) ?? { replay: tool.replay ?? "unsafe", runs: 0 };
            runs.runs++;
            recorder.toolRuns.set(key, runs);
            return (tool.execute as (...a: unknown[]) => unknown)(args, api, context);
          },
        }) as T;
      },
    };
  }
}

const macrotask: () => Promise<void> =
  typeof (globalThis as { setImmediate?: unknown }).setImmediate === "function"
    ? () => new Promise((resolve) => (globalThis as unknown as { setImmediate: (f: () => void) => void }).setImmediate(resolve))
    : () => new Promise((resolve) => setTimeout(resolve, 0));

/**
 * Lets queued work run until no storage call is in flight and `progress()` has not changed for `rounds`
 * macrotasks (SQLite yields to the event loop under load, so idleness is judged by storage, not by time).
 */
async function quiesce(progress: () => number, busy: () => number, rounds = 3): Promise<void> {
  let last = progress();
  let still = 0;
  for (let round = 0; round < 10_000 && still < rounds; round++) {
    await macrotask();
    const now = progress();
    still = now === last && busy() === 0 ? still + 1 : 0;
    last = now;
  }
}

/** One crash world: a fresh storage, the scenario run process after process, crashed at `crashes`, then checked. */
export async function runWorld<W>(
  scenario: CrashScenario<W>,
  backend: SweepBackend,
  options: CrashSweepOptions,
  crashes: CrashPoint[],
): Promise<WorldResult> {
  const recorder = new Recorder<W>(scenario.world ? scenario.world() : (undefined as W));
  const commitsPerProcess: number[] = [];
  const atCrash: Storage[] = [];
  let storage = await backend.create();
  let now = options.startAt ?? 1_000;
  const maxSteps = options.maxSteps ?? 5_000;
  const name = scenario.name ?? "scenario";
  const fail = (invariant: string, detail: string): WorldResult => ({
    commitsPerProcess,
    violation: new CrashSweepViolation(name, crashes, invariant, detail, recorder.log),
  });
  for (let process = 1; ; process++) {
    recorder.process = process;
    const crashAt = crashes[process - 1];
    const clock = createManualClock(now);
    let image: Uint8Array | undefined;
    let commits = 0;
    let error: unknown;
    const store = crashingStorage(
      storage,
      crashAt,
      (what, batch) => {
        commits++;
        recorder.log.push(`p${process}#${commits}: ${what}`);
        if (batch) recorder.requests.push(...requestEvents(batch, process));
      },
      (bytes) => (image = bytes),
    );
    const world = recorder.view();
    let harness: Harness | undefined;
    let started = false;
    const boot = (async () => {
      harness = await scenario.open(store, clock, world);
      await scenario.start(harness, world);
      started = true;
    })().catch((e: unknown) => (error = e));
    let finished = false;
    for (let step = 0; ; step++) {
      await quiesce(
        () => commits + clock.pending * 1e6 + (started ? 1e12 : 0),
        () => store.busy,
      );
      if (error !== undefined) return fail("the scenario ran", `process ${process} threw: ${String((error as Error)?.stack ?? error)}`);
      if (image) break;
      if (started && harness && (await isDone(scenario, harness, world))) {
        finished = true;
        break;
      }
      if (step >= maxSteps) return fail("progress", `process ${process} did not finish within ${maxSteps} scheduling rounds (a livelock?)`);
      if (!clock.next()) {
        await quiesce(
          () => commits + (started ? 1e12 : 0),
          () => store.busy,
          50,
        ); // be sure before calling it a stall
        if (image) break;
        if (started && harness && (await isDone(scenario, harness, world))) {
          finished = true;
          break;
        }
        return fail("progress", `process ${process} stalled: work is left but no timer is armed and nothing runs`);
      }
    }
    void boot;
    commitsPerProcess.push(commits);
    now = clock.now();
    if (finished) {
      // (A process that finished before its crash point ran shorter than the baseline: that world has no crash.)
      // Its close commits too; a crash point beyond the finish would freeze that commit and the close with it
      // (the number of commits before the finish varies with how SQLite's calls interleave).
      store.disarm();
      if (harness) await harness.close(BACKGROUND_CONTEXT).catch(() => {});
      break;
    }
    // The crash: the old harness is abandoned (its storage never answers again, its clock never moves).
    atCrash.push(await backend.fromImage(image!));
    recorder.log.push(`-- crash ${describeCrash(crashAt!)} of process ${process} --`);
    storage = await backend.fromImage(image!);
  }
  const view: CrashWorldView<W> & { [REQUESTS]: RequestEvent[] } = {
    [REQUESTS]: recorder.requests,
    crashes,
    state: recorder.state,
    storage,
    atCrash,
    effects: recorder.effects,
    lines: recorder.lines,
    toolRuns: recorder.toolRuns,
    log: recorder.log,
  };
  for (const [invariant, check] of BUILT_IN_CHECKS) {
    if (options.skip?.includes(invariant)) continue;
    const problem = await check(view);
    if (problem) return fail(invariant, problem);
  }
  for (const [index, check] of (scenario.invariants ?? []).entries()) {
    let problem: string | undefined | void;
    try {
      problem = await check(view);
    } catch (error) {
      problem = String((error as Error)?.message ?? error);
    }
    if (problem) return fail(`invariant ${index + 1} of the scenario`, problem);
  }
  return { commitsPerProcess };
}

async function isDone<W>(scenario: CrashScenario<W>, harness: Harness, world: SweepWorld<W>): Promise<boolean> {
  if (scenario.done) return scenario.done(harness, world);
  return harness.quiet;
}
