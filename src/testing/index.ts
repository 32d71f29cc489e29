export { createManualClock, type ManualClock } from "./clock.ts";
export {
  BUILT_IN_INVARIANTS,
  crashSweep,
  CrashSweepViolation,
  type BuiltInInvariant,
  type CrashScenario,
  type CrashSweepOptions,
  type CrashSweepResult,
  type CrashWorldView,
  type SweepBackend,
  type SweepWorld,
} from "./crash-sweep.ts";
export { crashTab, harnessStatus, harnessWorker, waitForReady, waitForTask, type CrashKind, type TaskMatch } from "./playwright.ts";
export { emptyBatch, sampleTask, storageConformance, type ConformanceBackend, type ConformanceCase } from "./storage-conformance.ts";
