export { createManualClock, type ManualClock } from "./clock.ts";
