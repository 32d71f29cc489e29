/**
 * The two-place crash sweep (issue 27 item 6's first part, decision 0029): a scenario runs in a tab that holds the
 * lease, hands over to the object over a `Link` that loses, duplicates and reorders, and the object finishes it.
 * Every world crashes once: at a commit of either place (right before or right after it is stored) or at a
 * hand-over message (its receiver dies right before or right after handling it). A crashed place restarts at
 * once from what its storage held (the tab reopens and takes the lease again, or opens read-only once it is gone;
 * the object starts following again, or takes the lease it holds). Invariants: the kernel's (./sweep/invariants.ts:
 * nothing committed lost, settled records unchanged, nothing left live, effects and unsafe tools at most once, one
 * result per tool call) over both places' storages, and the log's: one transaction per position across both places.
 */

import type { Clock } from "../../base/clock.ts";
import { BACKGROUND_CONTEXT } from "../../base/context.ts";
import { CrashSweepViolation } from "../../errors.ts";
import { type LeaseBook, memoryArbiter } from "../../follow/arbiter.ts";
import { Arrival, Departure, type HandOverMessage } from "../../follow/handover.ts";
import type { Harness, LeaseOptions } from "../../harness.ts";
import type { Storage } from "../../storage/storage.ts";
import { createManualClock, type ManualClock } from "../clock.ts";
import { crashingStorage } from "../sweep/crashing-storage.ts";
import { BUILT_IN_CHECKS } from "../sweep/invariants.ts";
import type { BuiltInInvariant, CrashWorldView, SweepBackend, SweepWorld } from "../sweep/types.ts";
import { backendOf, Recorder } from "../sweep/world.ts";
import { Link, type LinkAction } from "./link.ts";

export type Place = "tab" | "object";

export interface TwoPlaceScenario<W = unknown> {
  name: string;
  world?: () => W;
  /** Opens `place`'s harness on `storage` under `lease` with `clock` (the app's registry, models, settings). */
  open(place: Place, storage: Storage, clock: Clock, lease: LeaseOptions, world: SweepWorld<W>): Promise<Harness>;
  /** The tab's start-up, in every tab process that holds the lease (idempotent: make sure the work exists). */
  start(harness: Harness, world: SweepWorld<W>): Promise<void>;
  /** When the tab leaves (checked between steps). */
  leaveWhen(harness: Harness, world: SweepWorld<W>): boolean | Promise<boolean>;
  /** The scenario is finished at the holder. Default: nothing live, no open submission. */
  done?(harness: Harness, world: SweepWorld<W>): boolean | Promise<boolean>;
  /** Checks of the scenario's own on the holder's storage at the end, after the built-in ones: a message is a violation. */
  invariants?: Array<(view: CrashWorldView<W>) => string | undefined | Promise<string | undefined>>;
}

/** Where a world crashes: a place's `commit`-th storage write, or the `message`-th delivered hand-over message. */
export type TwoPlaceCrash = { place: Place; commit: number; edge: "before" | "after" } | { message: number; edge: "before" | "after" };

export interface TwoPlaceOptions {
  storage?: "memory" | "sqlite" | SweepBackend;
  /** The link's turns: which in-flight message to act on and how; after them the link delivers in order. */
  schedule?: ReadonlyArray<{ pick: number; action: LinkAction }>;
  /** The lease's time on the arbiter's clock. Default 5 s. */
  ttlMs?: number;
  skip?: readonly BuiltInInvariant[];
  maxSteps?: number;
}

export interface TwoPlaceResult {
  /** Storage writes of each place and hand-over messages delivered, in the world without a crash. */
  commits: Record<Place, number>;
  messages: number;
  worlds: number;
}

const ctx = BACKGROUND_CONTEXT;

function describeCrash(crash: TwoPlaceCrash | undefined): string {
  if (!crash) return "no crash";
  return "place" in crash
    ? `the ${crash.place} crashed right ${crash.edge} its commit ${crash.commit}`
    : `the receiver of message ${crash.message} crashed right ${crash.edge} handling it`;
}

/** A clock for one process on the world's clock: once the process is dead its timers never fire. */
function processClock(shared: ManualClock, alive: () => boolean): Clock {
  return {
    now: () => shared.now(),
    setTimer: (delayMs, fire) => shared.setTimer(delayMs, () => alive() && fire()),
  };
}

interface Process {
  alive: boolean;
  storage: Storage & { readonly busy: number; disarm(): void; crash(): Promise<Uint8Array> };
  harness?: Harness;
  /** The storage image a crash left, until the place restarts from it. */
  image?: Uint8Array;
  /** The tab's check of when to leave, between steps. */
  watch?: () => Promise<void>;
}

/** One world: both places run until the holder finished, crashing once at `crash` (or never). */
export async function runTwoPlaceWorld<W>(
  scenario: TwoPlaceScenario<W>,
  backend: SweepBackend,
  options: TwoPlaceOptions,
  crash: TwoPlaceCrash | undefined,
): Promise<{ commits: Record<Place, number>; messages: number; violation?: CrashSweepViolation }> {
  const recorder = new Recorder<W>(scenario.world ? scenario.world() : (undefined as W));
  const clock = createManualClock(1_000);
  const arbiter: LeaseBook = memoryArbiter({ clock, ttlMs: options.ttlMs ?? 5_000 });
  const link = new Link<HandOverMessage>();
  const commits: Record<Place, number> = { tab: 0, object: 0 };
  const stored = new Map<number, { place: Place; batch: string }>();
  const log: string[] = [];
  let split: string | undefined;
  let messages = 0;
  let crashed = false;
  let error: unknown;
  const fail = (invariant: string, detail: string) => ({
    commits,
    messages,
    violation: new CrashSweepViolation(`${scenario.name}, two places, ${describeCrash(crash)}`, [], invariant, detail, log),
  });
  const storages: Record<Place, Storage> = { tab: await backend.create(), object: await backend.create() };
  const processes: Partial<Record<Place, Process>> = {};
  const atEnd: Storage[] = [];
  let left = false;
  let tabDone = false;

  const crashNow = async (place: Place) => {
    const process = processes[place]!;
    crashed = true;
    process.alive = false;
    link.attach(place, undefined);
    log.push(`-- crash of the ${place} --`);
  };

  const boot = async (place: Place): Promise<void> => {
    const process: Process = { alive: true } as Process;
    const alive = () => process.alive;
    const store = crashingStorage(
      storages[place],
      crash && "place" in crash && crash.place === place && !crashed ? { commit: crash.commit, edge: crash.edge } : undefined,
      (what, batch) => {
        commits[place]++;
        log.push(`${place}#${commits[place]}: ${what}`);
        if (!batch?.fence) return;
        const text = JSON.stringify({ ...batch, fence: undefined });
        const before = stored.get(batch.fence.position);
        if (before && before.batch !== text)
          split ??= `position ${batch.fence.position} holds two different transactions (the ${before.place}'s and the ${place}'s)`;
        stored.set(batch.fence.position, { place, batch: text });
      },
      (bytes) => {
        process.image = bytes;
        void crashNow(place);
      },
    );
    process.storage = store;
    processes[place] = process;
    const pclock = processClock(clock, alive);
    const send = (to: Place) => (message: HandOverMessage) => {
      if (process.alive) link.send(to, message);
    };
    recorder.process++;
    const world = recorder.view();
    if (place === "object") {
      const arrival = await Arrival.start({
        place: "object",
        storage: store,
        arbiter,
        clock: pclock,
        send: send("tab"),
        open: async (storage, lease) => {
          const harness = await scenario.open("object", storage, pclock, lease, world);
          process.harness = harness;
          if (!harness.readOnly) harness.resume();
          return harness;
        },
      });
      if (process.alive) link.attach("object", (message) => arrival.receive(message));
      return;
    }
    const harness = await scenario.open("tab", store, pclock, { place: "tab", arbiter }, world);
    process.harness = harness;
    if (harness.readOnly) {
      tabDone = true; // the lease is the object's: this tab only follows (not part of this sweep)
      return;
    }
    await scenario.start(harness, world);
    harness.resume();
    let checking = false;
    const watch = async () => {
      if (!process.alive || left || checking) return;
      checking = true;
      const leave = await Promise.resolve(scenario.leaveWhen(harness, world)).finally(() => (checking = false));
      if (!leave || !process.alive || left) return;
      left = true;
      const mark = await harness.handOver(ctx);
      const departure = new Departure({ place: "tab", storage: store, mark, clock: pclock, send: send("object") });
      if (process.alive) link.attach("tab", (message) => departure.receive(message));
      await departure.start();
    };
    process.watch = watch;
  };

  const restart = async (place: Place, image: Uint8Array) => {
    storages[place] = await backend.fromImage(image);
    atEnd.push(await backend.fromImage(image));
    if (place === "tab") left = false;
    await boot(place);
  };

  try {
    // Not awaited: a crash during a place's open leaves its open hanging for ever, as a dead process's would.
    const start = (place: Place, image?: Uint8Array) =>
      void (image ? restart(place, image) : boot(place)).catch((e: unknown) => (error ??= e));
    start("object");
    start("tab");
    let turn = 0;
    for (let step = 0; ; step++) {
      if (step >= (options.maxSteps ?? 5_000)) return fail("progress", "the world did not finish (a livelock?)");
      for (let i = 0; i < 3; i++) await macrotask();
      for (const place of ["tab", "object"] as const) {
        const process = processes[place]!;
        const image = process?.image;
        if (process && !process.alive && image) {
          process.image = undefined;
          start(place, image);
        }
      }
      const tab = processes.tab;
      if (!tab || !processes.object) continue;
      // Not awaited: the hand-over joins the tab's phases, which may wait for the clock or the link.
      if (tab.alive && !tabDone) void tab.watch?.().catch((e: unknown) => (error ??= e));
      if (link.errors.length > 0) error ??= link.errors[0];
      if (error !== undefined) break;
      const holder = processes.object!.harness;
      if (holder && processes.object!.alive && (await isDone(scenario, holder, recorder))) break;
      const next = options.schedule?.[turn++] ?? { pick: 0, action: "deliver" as const };
      const target = link.inFlight.length > 0 ? link.inFlight[next.pick % link.inFlight.length]!.to : undefined;
      const delivering = target !== undefined && next.action !== "drop";
      const index = delivering ? messages + 1 : 0;
      const crashHere = crash && "message" in crash && !crashed && crash.message === index ? crash : undefined;
      if (target !== undefined && crashHere?.edge === "before") {
        link.step(next.pick, "drop");
        await freeze(target as Place);
        continue;
      }
      if (!link.step(next.pick, next.action)) {
        if (!clock.next()) {
          for (let i = 0; i < 20; i++) await macrotask();
          if (!clock.next() && link.inFlight.length === 0)
            return fail("progress", "nothing in flight, no timer armed, and the holder is not done");
        }
        continue;
      }
      if (delivering) messages++;
      if (crashHere?.edge === "after") {
        await link.handled;
        await freeze(target as Place);
      }
    }
  } catch (e) {
    error = e;
  }
  if (error !== undefined) return fail("the scenario ran", String((error as Error)?.stack ?? error));
  if (split) return fail("one transaction per position", split);

  async function freeze(place: Place) {
    const process = processes[place]!;
    process.image = await process.storage.crash();
    await crashNow(place);
  }

  // The end: the object holds the log; the tab's last storage is one more copy whose rows must all be there.
  for (const process of Object.values(processes)) process!.storage.disarm();
  const holder = processes.object!.harness!;
  const tabEnd = storages.tab;
  const view: CrashWorldView<W> = {
    crashes: [],
    state: recorder.state,
    storage: storages.object,
    atCrash: [tabEnd, ...atEnd],
    effects: recorder.effects,
    lines: recorder.lines,
    toolRuns: recorder.toolRuns,
    log,
  };
  for (const [invariant, check] of BUILT_IN_CHECKS) {
    if (invariant === "no-resend-before-backoff" || options.skip?.includes(invariant)) continue;
    const problem = await check(view as CrashWorldView<unknown>);
    if (problem) return fail(invariant, problem);
  }
  for (const [index, check] of (scenario.invariants ?? []).entries()) {
    const problem = await check(view);
    if (problem) return fail(`invariant ${index + 1} of the scenario`, problem);
  }
  await holder.close(ctx).catch(() => {});
  return { commits, messages };
}

async function isDone<W>(scenario: TwoPlaceScenario<W>, harness: Harness, recorder: Recorder<W>): Promise<boolean> {
  if (scenario.done) return scenario.done(harness, recorder.view());
  return harness.quiet;
}

const macrotask: () => Promise<void> =
  typeof (globalThis as { setImmediate?: unknown }).setImmediate === "function"
    ? () => new Promise((resolve) => (globalThis as unknown as { setImmediate: (f: () => void) => void }).setImmediate(resolve))
    : () => new Promise((resolve) => setTimeout(resolve, 0));

/**
 * Runs `scenario` once without a crash to count both places' commits and the hand-over's messages, then once per
 * crash point: both sides of every commit of either place and of every delivered message. Throws the first
 * `CrashSweepViolation`; resolves with the counts.
 */
export async function twoPlaceSweep<W>(scenario: TwoPlaceScenario<W>, options: TwoPlaceOptions = {}): Promise<TwoPlaceResult> {
  const backend = await backendOf(options.storage ?? "memory");
  const baseline = await runTwoPlaceWorld(scenario, backend, options, undefined);
  if (baseline.violation) throw baseline.violation;
  const points: TwoPlaceCrash[] = [];
  for (const place of ["tab", "object"] as const) {
    for (let commit = 1; commit <= baseline.commits[place]; commit++) {
      points.push({ place, commit, edge: "before" }, { place, commit, edge: "after" });
    }
  }
  for (let message = 1; message <= baseline.messages; message++) points.push({ message, edge: "before" }, { message, edge: "after" });
  for (const point of points) {
    const result = await runTwoPlaceWorld(scenario, backend, options, point);
    if (result.violation) throw result.violation;
  }
  return { commits: baseline.commits, messages: baseline.messages, worlds: points.length };
}
