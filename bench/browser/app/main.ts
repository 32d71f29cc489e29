/**
 * The bench page. `?mode=kernel` starts the kernel-vs-raw worker; `?mode=harness&path=…&pool=…` starts a
 * `serveHarness` worker, exactly as an app does. Node drives it through `window.bench`.
 *
 * Clocks: every time the page reports is in ms since this document's navigation started (its
 * `performance.timeOrigin`). Worker times arrive as `timeOrigin + now()` on the worker's clock and are put on
 * the page's clock by subtracting the page's `timeOrigin`: a dedicated worker lives in the page's renderer
 * process, and Chromium derives every context's `timeOrigin` there from the same monotonic clock. The
 * page also timestamps the worker's "first step" broadcast when it arrives, which bounds the worker's time
 * from above (a check that the two clocks agree).
 */
import * as Comlink from "comlink";
import { connectHarness, type HarnessClient } from "../../../src/browser/client.ts";
import type { HarnessStatus } from "../../../src/host/protocol.ts";
import type { HarnessWorkerConfig } from "./harness-worker.ts";
import type { KernelWorkerApi } from "./kernel-worker.ts";
import type { StepMark } from "./tasks.ts";

export interface RecoveryTimeline {
  /** Page clock, ms since navigation start of this document. */
  responseEnd: number;
  domContentLoaded: number;
  scriptStart: number;
  workerCreated: number;
  workerScript: number;
  /** The worker took the database lock and started opening OPFS. */
  opening: number | null;
  /** The database is open; `Harness.open` recovers. */
  recovering: number | null;
  ready: number | null;
  firstStep: (StepMark & { committed: number; seenByPage: number | null }) | null;
}

export interface BenchWindow {
  kernel?: Comlink.Remote<KernelWorkerApi>;
  client?: HarnessClient;
  timeline?: () => Promise<RecoveryTimeline>;
  /** Set when the page hears the worker's first step (page clock). */
  firstStepSeen?: number;
  status?: HarnessStatus["kind"];
  /** Resolves with the task id when an armed crash point is reached (the worker then hangs there). */
  cut?: Promise<number>;
}

declare global {
  interface Window {
    bench: BenchWindow;
  }
}

const scriptStart = performance.now();
const params = new URLSearchParams(location.search);
const bench: BenchWindow = {};
window.bench = bench;

if (params.get("mode") === "stream" || params.get("mode") === "direct") {
  void import("./stream-page.ts"); // the streaming bench (bench/browser/stream.ts)
} else if (params.get("mode") === "kernel") {
  const worker = new Worker(new URL("./kernel-worker.ts", import.meta.url), { type: "module", name: "bench-kernel" });
  bench.kernel = Comlink.wrap<KernelWorkerApi>(worker);
} else {
  const channel = new BroadcastChannel("pi-bench");
  channel.onmessage = (event) => {
    if ((event.data as { type?: string }).type === "first-step") bench.firstStepSeen ??= performance.now();
  };
  const config: HarnessWorkerConfig = {
    path: params.get("path") ?? "/bench.sqlite3",
    pool: params.get("pool") ?? "pi-bench",
    noRestartLimit: params.get("noRestartLimit") === "1",
  };
  const workerCreated = performance.now();
  const worker = new Worker(new URL("./harness-worker.ts", import.meta.url), { type: "module", name: JSON.stringify(config) });
  const client = connectHarness(worker);
  client.onStatus((status) => (bench.status = status.kind));
  bench.client = client;
  bench.timeline = async () => {
    const worker = await client.call<{
      workerOrigin: number;
      scriptAt: number;
      statusAt: Partial<Record<HarnessStatus["kind"], number>>;
      firstStep: StepMark | null;
    }>("timings");
    const page = (at: number | undefined) => (at === undefined ? null : at - performance.timeOrigin);
    const navigation = performance.getEntriesByType("navigation")[0] as PerformanceNavigationTiming | undefined;
    return {
      responseEnd: navigation?.responseEnd ?? NaN,
      domContentLoaded: navigation?.domContentLoadedEventEnd ?? NaN,
      scriptStart,
      workerCreated,
      workerScript: page(worker.scriptAt)!,
      opening: page(worker.statusAt.opening),
      recovering: page(worker.statusAt.recovering),
      ready: page(worker.statusAt.ready),
      firstStep: worker.firstStep
        ? { ...worker.firstStep, committed: page(worker.firstStep.at)!, seenByPage: bench.firstStepSeen ?? null }
        : null,
    };
  };
}
if (params.get("mode") !== "stream" && params.get("mode") !== "direct") document.body.dataset.ready = "true";
