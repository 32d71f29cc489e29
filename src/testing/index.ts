export { createManualClock, type ManualClock } from "./clock.ts";
export { crashTab, harnessStatus, harnessWorker, waitForReady, waitForTask, type CrashKind } from "./playwright.ts";
