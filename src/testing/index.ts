export { createManualClock, type ManualClock } from "./clock.ts";
export { crashTab, harnessStatus, harnessWorker, waitForReady, waitForTask, type CrashKind } from "./playwright.ts";
export { emptyBatch, sampleTask, storageConformance, type ConformanceBackend, type ConformanceCase } from "./storage-conformance.ts";
