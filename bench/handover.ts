/**
 * The hand-over bench (issue 27 item 6, decision 0040), against a real workerd (miniflare): a tab — a harness on
 * sqlite-wasm in Node, under its Durable Object's lease over a real follow socket, with the product's `FollowLink`,
 * `remoteArbiter` and `Mirror` — and the object of bench/handover-worker.ts.
 *
 * - **Clean hand-over**: the tab runs `bench.relay` and leaves at step 20 as a closing page's worker does
 *   (`handOver({ drain: false })`, then `Mirror.leave`: the rest and the release in one tick); timed in Node from the
 *   release frame leaving the tab's socket to the object's first print (its first step after the takeover's
 *   recovery) arriving through the PRINT binding. A fresh object per run. Target: p95 < 500 ms.
 * - **Effect-free steps while mirroring**: the same `bench.stepper` job of 1,000 checkpoint commits in a tab that
 *   mirrors to its object, under a lease from an in-process arbiter (the fenced log without a link), and with no
 *   lease at all, taking turns; µs per step, and the ratio of the medians (mirrored ÷ no lease). Beside it the tab
 *   process's CPU time per step, mirrored ÷ no lease run by run: what the mirrored step costs the tab whatever else
 *   the machine runs (decision 0042). Target: zero added latency — reported as the ratio.
 * - **Round trips before an effect**: `bench.effect` commits its intent and waits for `runtime.beforeEffect` at every
 *   step; counted per step: the object's acknowledgements the wait took (1: the push of that commit and its ack). Target: one.
 *
 * Nothing is asserted; the figures go to `npm run bench`'s table (bench/run.ts).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { bundleWorker, quietRuntime, sqliteObject, workerModules } from "../examples/local-edge.ts";
import { systemClock } from "../src/base/clock.ts";
import { memoryArbiter } from "../src/follow/arbiter.ts";
import { FollowLink } from "../src/follow/link-client.ts";
import { Mirror, remoteArbiter } from "../src/follow/mirror.ts";
import type { LeaseOptions } from "../src/harness.ts";
import { createRegistry, BACKGROUND_CONTEXT as ctx, defineExtension, Harness } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { relayTask } from "./relay-task.ts";
import { type Summary, summarize } from "./stats.ts";
import { effectTask, stepper } from "./stepper.ts";

const QUICK = Boolean(process.env.BENCH_QUICK);
const HANDOVERS = QUICK ? 8 : 20;
const STEPS = 1_000;
const STEP_RUNS = QUICK ? 5 : 11;
const EFFECT_STEPS = QUICK ? 50 : 200;
const LEAVE_AT = 20;

interface MiniflareSocket {
  accept(): void;
  send(frame: string): void;
  close(): void;
  addEventListener(type: "message", listener: (event: { data: unknown }) => void): void;
}

export interface HandoverBench {
  handovers: number;
  /** Release frame sent by the tab → the object's first step printed (ms). */
  releaseToFirstStepMs: Summary & { p95: number };
  meetsTarget: boolean;
  steps: number;
  followStepMicros: Summary;
  plainStepMicros: Summary;
  /** The same steps under a lease from an in-process arbiter (the fenced log's own cost: epoch, position, log tail). */
  fencedStepMicros: Summary;
  /** Median µs per step with follow ÷ without. */
  addedLatencyRatio: number;
  /** The same ratio run by run (each run's mirrored job over its job with no lease). */
  addedLatencyRunRatio: Summary;
  /**
   * The tab process's CPU time per step (user + system, µs), mirrored and with no lease, best of three per run like the
   * wall times, and their ratio run by run: what a step costs the tab whatever else the machine runs (decision 0042).
   */
  followStepCpuMicros: Summary;
  plainStepCpuMicros: Summary;
  addedCpuRunRatio: Summary;
  /**
   * The mirrored tab's CPU time per step until the object acknowledged the job's last step (decision 0093): the
   * pushes a round sends after the job ended are the tab's work too (the figure above stops at the job's end).
   */
  followStepCpuToAckMicros: Summary;
  /**
   * The tab process's minor page faults per step, mirrored and with no lease (best of three per run, like the CPU):
   * memory touched for the first time, counted whatever the load. A job whose log grows into fresh wasm memory
   * faults about once per 4 KiB of log rows (decision 0106: the bench kept every job's database open, ~0.1 a step).
   */
  followStepFaults: Summary;
  plainStepFaults: Summary;
  effectSteps: number;
  /** Acknowledgements each wait before an effect took, per step. */
  roundTripsBeforeEffect: { median: number; max: number; histogram: Record<string, number> };
  effectStepMs: Summary;
}

export async function benchHandover(): Promise<HandoverBench> {
  const persist = mkdtempSync(join(tmpdir(), "pi-durable-bench-handover-"));
  const prints = new Map<string, (line: string) => void>();
  const mf = new Miniflare({
    modules: workerModules(await bundleWorker(new URL("./handover-worker.ts", import.meta.url))),
    compatibilityDate: "2026-04-01",
    handleRuntimeStdio: quietRuntime,
    durableObjectsPersist: persist,
    durableObjects: { HANDOVER: sqliteObject("HandoverObject") },
    serviceBindings: {
      PRINT: async (request: { text(): Promise<string> }) => {
        const line = await request.text();
        for (const listen of prints.values()) listen(line);
        return new Response("ok");
      },
    },
  });
  /** A tab following object `name`: its link on a real socket, its harness under the object's lease. */
  const openTab = async (
    name: string,
    registry: ReturnType<typeof createRegistry>,
    frames: { release?: number } = {},
    /** Told after each wait before an effect: how many acknowledgements it took. */
    waited?: (acks: number) => void,
  ) => {
    const response = (await mf.dispatchFetch(`http://bench/${name}/follow`, { headers: { Upgrade: "websocket" } })) as unknown as {
      webSocket?: MiniflareSocket;
    };
    const ws = response.webSocket;
    if (!ws) throw new Error(`the object ${name} did not open its follow socket`);
    ws.accept();
    const link = new FollowLink({
      clock: systemClock,
      send: (frame) => {
        if (frame.startsWith('{"type":"release"')) frames.release ??= performance.now();
        ws.send(frame);
      },
    });
    ws.addEventListener("message", (event) => link.receive(String(event.data)));
    link.connected();
    let mirror: Mirror | undefined;
    let acks = 0;
    const lease: LeaseOptions = {
      place: "tab",
      arbiter: remoteArbiter(link),
      confirm: async (position, context) => {
        const before = acks;
        if (mirror) await mirror.whenAcknowledged(position, context);
        waited?.(acks - before);
      },
    };
    const storage = await openSqliteStorage({ vfs: "memory" });
    const harness = await Harness.open(storage, { registry, lease }, ctx);
    if (harness.readOnly) throw new Error(`the tab did not get the lease of ${name}`);
    mirror = new Mirror({ harness, link, clock: systemClock });
    mirror.onAcknowledged(() => acks++);
    // Closing the tab stops its mirror and its link as a worker's follow link does (their resend timers would keep
    // the bench's process alive after the run).
    const close = () => {
      mirror?.stop();
      link.disconnected();
      ws.close();
    };
    return { harness, mirror, close, storage };
  };

  try {
    await mf.ready;
    // Clean hand-over: release → the object's first step. Run -1 warms workerd and the JIT up.
    const handover: number[] = [];
    for (let run = -1; run < HANDOVERS; run++) {
      const name = `handover-${run}`;
      const frames: { release?: number } = {};
      let leave: () => void = () => {};
      const registry = createRegistry().install(
        defineExtension({
          name: "bench",
          tasks: [relayTask((n) => void (n === LEAVE_AT && queueMicrotask(() => leave()))), effectTask, stepper],
        }),
      );
      const tab = await openTab(name, registry, frames);
      let first: number | undefined;
      // The object's first step after the takeover, and its last (the next run starts once this object is done).
      const finished = new Promise<void>((resolve) =>
        prints.set(name, (line) => {
          first ??= performance.now();
          if (line === `object ${LEAVE_AT + 5}`) resolve();
        }),
      );
      leave = () =>
        void tab.harness
          .handOver(ctx, { drain: false })
          .then((mark) => tab.mirror.leave(mark, ctx))
          .catch(() => {});
      const root = await tab.harness.root(ctx);
      await root.commit(
        (tx) =>
          tx.createTask(
            relayTask(() => {}),
            { to: LEAVE_AT + 5 },
          ),
        ctx,
      );
      tab.harness.resume();
      await finished;
      prints.delete(name);
      if (frames.release === undefined || first === undefined) throw new Error("the tab never sent its release");
      if (run >= 0) handover.push(first - frames.release);
      tab.close();
      await tab.harness.close(ctx).catch(() => {});
      await tab.storage.close();
    }

    // Effect-free steps: the same job mirrored, fenced without a link and with no lease, taking turns; the best of
    // three per run (on a shared machine noise only adds time), and the ratio run by run beside the medians'.
    const follow: number[] = [];
    const fenced: number[] = [];
    const runRatios: number[] = [];
    const plain: number[] = [];
    const followCpu: number[] = [];
    const followCpuToAck: number[] = [];
    const plainCpu: number[] = [];
    const cpuRatios: number[] = [];
    const followFaults: number[] = [];
    const plainFaults: number[] = [];
    const registry = createRegistry().install(defineExtension({ name: "bench", tasks: [relayTask(() => {}), effectTask, stepper] }));
    const job = async (harness: Harness) => {
      const root = await harness.root(ctx);
      const id = await root.commit((tx) => tx.createTask(stepper, { steps: STEPS }), ctx);
      const start = performance.now();
      const faults = process.resourceUsage().minorPageFault;
      const cpuStart = process.cpuUsage();
      harness.resume();
      await harness.waitForTask(id, ctx);
      const cpu = process.cpuUsage(cpuStart);
      return {
        wall: ((performance.now() - start) * 1000) / STEPS,
        cpu: (cpu.user + cpu.system) / STEPS,
        cpuStart,
        faults: (process.resourceUsage().minorPageFault - faults) / STEPS,
      };
    };
    for (let run = -1; run < STEP_RUNS; run++) {
      let withFollow = Infinity;
      let fencedOnly = Infinity;
      let without = Infinity;
      let withFollowCpu = Infinity;
      let withFollowCpuToAck = Infinity;
      let withoutCpu = Infinity;
      let withFollowFaults = Infinity;
      let withoutFaults = Infinity;
      for (let turn = 0; turn < 3; turn++) {
        const tab = await openTab(`steps-${run}-${turn}`, registry);
        const mirrored = await job(tab.harness);
        withFollow = Math.min(withFollow, mirrored.wall);
        withFollowCpu = Math.min(withFollowCpu, mirrored.cpu);
        withFollowFaults = Math.min(withFollowFaults, mirrored.faults);
        await tab.mirror.whenAcknowledged(tab.harness.lease!.position, ctx); // the object caught up before the next run
        const toAck = process.cpuUsage(mirrored.cpuStart);
        withFollowCpuToAck = Math.min(withFollowCpuToAck, (toAck.user + toAck.system) / STEPS);
        tab.close();
        await tab.harness.close(ctx).catch(() => {});
        await tab.storage.close();
        // The fenced log alone: a lease from an arbiter in the same process, no link, no mirror.
        const local = await Harness.open(
          await openSqliteStorage({ vfs: "memory" }),
          { registry, lease: { place: "tab", arbiter: memoryArbiter({ clock: systemClock, ttlMs: 600_000 }) } },
          ctx,
        );
        fencedOnly = Math.min(fencedOnly, (await job(local)).wall);
        await local.close(ctx);
        await local.storage.close();
        const alone = await Harness.open(await openSqliteStorage({ vfs: "memory" }), { registry }, ctx);
        const unleased = await job(alone);
        without = Math.min(without, unleased.wall);
        withoutCpu = Math.min(withoutCpu, unleased.cpu);
        withoutFaults = Math.min(withoutFaults, unleased.faults);
        await alone.close(ctx);
        await alone.storage.close();
      }
      if (run < 0) continue;
      runRatios.push(withFollow / without);
      cpuRatios.push(withFollowCpu / withoutCpu);
      followCpu.push(withFollowCpu);
      followCpuToAck.push(withFollowCpuToAck);
      followFaults.push(withFollowFaults);
      plainFaults.push(withoutFaults);
      plainCpu.push(withoutCpu);
      follow.push(withFollow);
      fenced.push(fencedOnly);
      plain.push(without);
    }

    // Round trips before an effect: the object's acknowledgements heard while each step's wait was pending.
    const trips: number[] = [];
    const stepMs: number[] = [];
    let last = performance.now();
    const tab = await openTab("effects", registry, {}, (acks) => {
      trips.push(acks);
      const now = performance.now();
      stepMs.push(now - last);
      last = now;
    });
    const root = await tab.harness.root(ctx);
    const id = await root.commit((tx) => tx.createTask(effectTask, { steps: EFFECT_STEPS }), ctx);
    last = performance.now();
    tab.harness.resume();
    await tab.harness.waitForTask(id, ctx);
    tab.close();
    await tab.harness.close(ctx).catch(() => {});
    await tab.storage.close();

    const releaseToFirstStepMs = { ...summarize(handover), p95: percentile(handover, 0.95) };
    const followStepMicros = summarize(follow);
    const plainStepMicros = summarize(plain);
    const histogram: Record<string, number> = {};
    for (const count of trips) histogram[count] = (histogram[count] ?? 0) + 1;
    return {
      handovers: HANDOVERS,
      releaseToFirstStepMs,
      meetsTarget: releaseToFirstStepMs.p95 < 500,
      steps: STEPS,
      followStepMicros,
      plainStepMicros,
      fencedStepMicros: summarize(fenced),
      addedLatencyRatio: followStepMicros.median / plainStepMicros.median,
      addedLatencyRunRatio: summarize(runRatios),
      followStepCpuMicros: summarize(followCpu),
      plainStepCpuMicros: summarize(plainCpu),
      addedCpuRunRatio: summarize(cpuRatios),
      followStepCpuToAckMicros: summarize(followCpuToAck),
      followStepFaults: summarize(followFaults),
      plainStepFaults: summarize(plainFaults),
      effectSteps: trips.length,
      roundTripsBeforeEffect: { median: summarize(trips).median, max: Math.max(...trips), histogram },
      effectStepMs: summarize(stepMs),
    };
  } finally {
    await mf.dispose();
    rmSync(persist, { recursive: true, force: true });
  }
}

/** The value at fraction `p` of the sorted runs (nearest rank). */
function percentile(runs: number[], p: number): number {
  const sorted = [...runs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!;
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(JSON.stringify(await benchHandover(), null, 2));
