import { BUILTIN_TASKS } from "./agent/builtins.ts";
import type { ModelCatalog } from "./agent/model-types.ts";
import type { ServerCallPort } from "./agent/server-port.ts";
import type { PendingApproval } from "./agent/tasks/approvals.ts";
import type { PendingPageCall } from "./agent/tasks/page-calls.ts";
import type { Clock } from "./base/clock.ts";
import type { EnvFactory } from "./env/types.ts";
import { InvalidSetting } from "./errors.ts";
import type { LeaseArbiter } from "./follow/arbiter.ts";
import type { ReportHandler } from "./reports.ts";
import type { ConfirmPosition } from "./session/fence.ts";
import type { Settings } from "./settings.ts";
import type { TaskRecord } from "./storage/records.ts";
import type { TaskInspectionState } from "./tasks/inspect.ts";
import type { CrashPointHandler } from "./tasks/options.ts";
import { Registry } from "./tasks/registry.ts";

export interface HarnessOptions {
  /** Installed extensions; create it with `createRegistry()`. */
  registry: Registry;
  /** The models (pi-ai `createModels()`), handed to the agent's tasks (the kernel never sees them). */
  models?: ModelCatalog;
  settings?: Settings;
  /** The harness clock in ms. Default `Date.now`. */
  now?: () => number;
  /** The timer that goes with `now`. Default `setTimeout`. Pass both (or `clock`) to control time in tests. */
  timer?: Clock["setTimer"];
  /** Clock and timer together; wins over `now`/`timer`. */
  clock?: Clock;
  /**
   * S7: typed reports (faults, interruptions, extension errors, a commit listener's failure — once until it is heard
   * well again). Never throws into the harness. It should not write to the harness it hears (a report per commit of its
   * own would be a loop but for that "once").
   */
  onReport?: ReportHandler;
  /**
   * Under a `lease`: told once when the harness finds its lease lost while it ran (a refused renewal, its expiry
   * unrenewed, a commit refused by the log's fence); the harness stops then as after a crash (`stopped` resolves when
   * it has), and a host may open it again read-only (decision 0057). Told as the stop begins, so a host's status need
   * not say the work runs here meanwhile. Not told for a hand-over (`handOver`) or a close.
   */
  onLeaseLost?: (reason: Error, stopped: Promise<void>) => void;
  /** S5: open without changing anything; every write rejects with `ReadOnlySession`. */
  readOnly?: boolean;
  /**
   * Open and `resume()` in one step. Tasks a crash left `running` then stay `running` (restarts + 1) and
   * are taken again directly — one rewrite fewer per task than a pending park, which is most of recovery
   * after a crash with thousands of running tasks. Without it (the default) open parks them as `pending`.
   * Under a `lease` another place holds, the harness opens read-only and does not resume.
   */
  resume?: boolean;
  /**
   * Pages still connected across this open, by page id: their page tool claims survive it (decision 0028).
   * A Durable Object passes the pages whose hibernatable sockets outlived its last instance; every other
   * claim from before the open was cut off with it and is released.
   */
  connectedPages?: readonly string[];
  /** The execution environment of a conversation (files for tools), built on demand. */
  env?: EnvFactory;
  /** Named crash points for tests (`"memo:after-write"`, `"task:after-commit"`, `"tool:after-intent"`, …). */
  crashPoint?: CrashPointHandler;
  /**
   * Writes only under a lease from `arbiter` (docs/decisions/0029): every transaction gets the next log position
   * and the lease's epoch; when another place holds the lease the harness opens read-only; when the lease is lost
   * (expired on the harness clock, superseded, handed over) it stops as after a crash. Absent: one place, no log.
   */
  lease?: LeaseOptions;
  /**
   * The way to the conversation's server for its server tools (`runsOn: "server"`, decision 0036): while this
   * harness holds a `lease`, each server tool's call goes through it under its call id and the lease's epoch (the
   * tab: its object's `ServerCallClient`; the object: its own `ServerCalls`). Absent, or without a lease, server
   * tools run here as any tool.
   */
  serverCalls?: ServerCallPort;
}

export interface LeaseOptions {
  /** This place's name ("tab", "object"): who the arbiter grants the lease to. */
  place: string;
  arbiter: LeaseArbiter;
  /**
   * Acknowledgement before effects (decision 0032): resolves once the place that could take the lease over after
   * its expiry holds this place's log up to `position` (the tab's mirror: "the object acknowledged up to P").
   * Awaited after the commit that records an unsafe tool's intent or a model request and before that effect
   * starts, so a takeover after a crash can lose only steps without effects. Not called (no wait) when the arbiter
   * grants a pinned lease (`ttlMs: Infinity`: no one else may take over) or when absent (this place's own copy
   * is what a takeover recovers from: the object). Effect-free steps never wait.
   */
  confirm?: ConfirmPosition;
  /**
   * Remember a pinned grant (`ttlMs: Infinity`) in this place's storage and, at a reopen while the log's head is
   * still of that epoch, write on under it at once without asking the arbiter — offline too — telling it once it is
   * reachable (a renewal; refused, the place stops). Only for a place whose previous incarnation is surely gone when
   * it reopens (a browser worker holds its database's Web Lock). Default false (decision 0039).
   */
  resumePinned?: boolean;
}

export interface Inspection {
  scheduling: "paused" | "running" | "closed" | "read-only";
  tasks: Array<{ record: TaskRecord; state: TaskInspectionState }>;
  /** Every tool call that waits for a person's decision, with its arguments and age, oldest first. */
  approvals: PendingApproval[];
  /** Every page tool call that waits for a page or that a page runs, oldest first (decision 0028). */
  pageCalls: PendingPageCall[];
  /** What this harness's open recovered. */
  recovery: Recovery;
}

/**
 * What an open found and recovered (S4). A task's `restarts` is cleared by its next progress, so this is where
 * a reload's restarts stay visible.
 */
export interface Recovery {
  /**
   * How the harness before this open stopped: `crash` (cut off — a reload, a terminated worker, a killed
   * process), `close` (a clean `close()`), `none` (no earlier open is recorded: a new database), or `rebuilt` (this
   * copy's rows were just replaced whole by its object's snapshot — a new device's first copy, or one that could not
   * follow: nothing stopped here, and `tasks` is empty; decision 0103).
   */
  stop: "crash" | "close" | "none" | "rebuilt";
  /** The tasks a crash left running; each was counted a restart (`restarts`: its count after this open). */
  tasks: Array<{ id: number; kind: string; restarts: number }>;
}

/** Refuses options `Harness.open` cannot work with, before it reads storage. */
export function checkOptions(options: HarnessOptions): void {
  if (!(options?.registry instanceof Registry))
    throw new InvalidSetting("HarnessOptions.registry is required: create one with createRegistry().");
  const missing = BUILTIN_TASKS.map((task) => task.name).filter((kind) => !options.registry.task(kind));
  if (missing.length > 0)
    throw new InvalidSetting(`The registry lacks the built-in tasks ${missing.join(", ")}: create it with createRegistry().`);
  if (options.resume && options.readOnly)
    throw new InvalidSetting("HarnessOptions.resume and readOnly exclude each other: a read-only harness never runs tasks.");
}
