import type { AnyTool } from "../../agent/tool.ts";
import type { Harness } from "../../harness.ts";
import type { Storage } from "../../storage/storage.ts";
import type { ManualClock } from "../clock.ts";

/** A scenario for `crashSweep` (see ../crash-sweep.ts for what a sweep does with it). */
export interface CrashScenario<W = unknown> {
  /** Shows in messages. */
  name?: string;
  /** State that survives crashes, like files on disk (fresh for every world): effects, tool runs, files. */
  world?: () => W;
  /**
   * Opens a harness on `storage` with `clock` (pass it as `HarnessOptions.clock`). Called at the start of
   * every process: the first one and each one after a crash.
   */
  open(storage: Storage, clock: ManualClock, world: SweepWorld<W>): Promise<Harness>;
  /**
   * The app's start-up, run in every process after `open` (like a page's code after a reload): it must be
   * idempotent — make sure the work exists (look before you create, reuse a `requestId`) and start it.
   */
  start(harness: Harness, world: SweepWorld<W>): Promise<void>;
  /** True when the scenario is finished. Default: no live task and no open submission. */
  done?(harness: Harness, world: SweepWorld<W>): boolean | Promise<boolean>;
  /** Checks of your own, run after the built-in ones; return (or throw) a message to report a violation. */
  invariants?: Array<(view: CrashWorldView<W>) => string | undefined | void | Promise<string | undefined | void>>;
}

export interface CrashSweepOptions {
  /** `"memory"` (MemoryStorage, default), `"sqlite"` (sqlite-wasm in memory), or your own backend. */
  storage?: "memory" | "sqlite" | SweepBackend;
  /**
   * Also crash a second time, after the j-th commit of the recovering process. `true` runs every pair;
   * `{ sample, seed }` runs at most `sample` pairs drawn with the seed (every single crash still runs).
   */
  double?: boolean | { sample: number; seed?: number };
  /** Run only a sample of the single crash points (every one by default), drawn with the seed. */
  single?: { sample: number; seed?: number };
  /** Skip built-in invariants by name (see `BUILT_IN_INVARIANTS`). */
  skip?: readonly BuiltInInvariant[];
  /** Clock start of the first process. Default 1000. */
  startAt?: number;
  /** Scheduling rounds (clock steps) a process may take before the world counts as livelocked. Default 5000. */
  maxSteps?: number;
}

export interface SweepBackend {
  create(): Promise<Storage>;
  fromImage(image: Uint8Array): Promise<Storage>;
}

export const BUILT_IN_INVARIANTS = [
  "committed-rows-survive",
  "settled-never-change",
  "no-task-left-live",
  "effects-at-most-once",
  "one-result-per-tool-call",
  "unsafe-tool-never-twice",
  "no-resend-before-backoff",
] as const;
export type BuiltInInvariant = (typeof BUILT_IN_INVARIANTS)[number];

/** What scenario code gets: the user's world plus the recorders the built-in invariants read. */
export interface SweepWorld<W = unknown> {
  readonly state: W;
  /** The process this code runs in: 1 for the first, 2 after the first crash, … */
  readonly process: number;
  /** Records an effect that must happen at most once in the whole world (a memo-guarded side effect). */
  once(key: string): void;
  /** Records something that may repeat (a log line); kept in order for your invariants. */
  log(line: string): void;
  /**
   * Wraps a tool so its runs are counted per call: an `"unsafe"` tool must never run twice for one call
   * (built-in invariant), a `"safe"` one may.
   */
  track<T extends AnyTool>(tool: T): T;
}

/** What invariants see at the end of a crash world. */
export interface CrashWorldView<W = unknown> {
  /** Where the world crashed: one point, or two (the second counted in the second process). */
  crashes: readonly CrashPoint[];
  state: W;
  /** The storage at the end (after the last process finished). */
  storage: Storage;
  /** The storage image right after each crash (a read-only copy). */
  atCrash: readonly Storage[];
  effects: ReadonlyMap<string, number>;
  lines: readonly string[];
  /** Tool runs per `name:callId`, with the tool's replay policy. */
  toolRuns: ReadonlyMap<string, { replay: "safe" | "unsafe"; runs: number }>;
  /** Every commit of the world in order, one line each. */
  log: readonly string[];
}

/** A crash right after commit `commit` was stored, or right before it would have been (`edge: "before"`). */
export interface CrashPoint {
  commit: number;
  edge: "after" | "before";
}

export function describeCrash(point: CrashPoint): string {
  return point.edge === "after" ? `right after commit ${point.commit}` : `right before commit ${point.commit}`;
}

export interface CrashSweepResult {
  /** Commits of the scenario without a crash. */
  commits: number;
  /** Crash worlds run: single crashes plus double ones. */
  worlds: number;
  single: number;
  double: number;
}
