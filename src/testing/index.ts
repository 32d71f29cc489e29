export { CrashSweepViolation } from "../errors.ts";
export { createManualClock, type ManualClock } from "./clock.ts";
export {
  BUILT_IN_INVARIANTS,
  type BuiltInInvariant,
  type CrashPoint,
  type CrashScenario,
  type CrashSweepOptions,
  type CrashSweepResult,
  type CrashWorldView,
  crashSweep,
  type SweepBackend,
  type SweepWorld,
} from "./crash-sweep.ts";
export { type CrashKind, crashTab, harnessStatus, harnessWorker, type TaskMatch, waitForReady, waitForTask } from "./playwright.ts";
export { type ConformanceBackend, type ConformanceCase, emptyBatch, sampleTask, storageConformance } from "./storage-conformance.ts";
