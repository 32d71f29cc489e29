/**
 * The two-place crash sweep (issue 27 item 6's first part, decision 0029): a scenario runs in a tab that holds the
 * lease, hands over to the object over a `Link` that loses, duplicates and reorders, and the object finishes it.
 * Every world crashes once: at a commit of either place (right before or right after it is stored) or at a
 * hand-over message (its receiver dies right before or right after handling it). A crashed place restarts at
 * once from what its storage held (the tab reopens and takes the lease again, or opens read-only once it is gone;
 * the object starts following again, or takes the lease it holds). Invariants: the kernel's (./sweep/invariants.ts:
 * nothing committed lost, settled records unchanged, nothing left live, effects and unsafe tools at most once, one
 * result per tool call) over both places' storages, and the log's: one transaction per position across both places.
 *
 * With `mirror` (decision 0032) the tab pushes every transaction live and its effects wait for the object's
 * acknowledgement; it may finish the scenario itself (the object following), crash and stay away past the expiry
 * (`stayAway`), or be cut off (`partition`) — then the object takes over, the tab's unpushed stretch is a fork of an
 * older epoch, and the check is that every effect the tab started is in the object's history. With `pageLeaving` the
 * page's `lease.leaving` (decision 0101) goes out first, on a socket of its own that outlives the worker; with
 * `workerNeverReleases` the worker dies right after it, and the result counts the worlds where the object took the
 * lease by that word alone (`takenAtLeaving`).
 */

import type { Clock } from "../../base/clock.ts";
import { BACKGROUND_CONTEXT } from "../../base/context.ts";
import type { Json } from "../../base/json.ts";
import { ConnectionLost, CrashSweepViolation } from "../../errors.ts";
import type { LeaseArbiter } from "../../follow/arbiter.ts";
import { Arrival, Departure, type HandOverMessage } from "../../follow/handover.ts";
import type { Harness, LeaseOptions } from "../../harness.ts";
import type { Storage } from "../../storage/storage.ts";
import { createManualClock } from "../clock.ts";
import { crashingStorage } from "../sweep/crashing-storage.ts";
import type { SweepBackend, SweepWorld } from "../sweep/types.ts";
import { backendOf, Recorder } from "../sweep/world.ts";
import { FollowingTab, startObjectEnd } from "./follow-places.ts";
import type { StoredLog } from "./fork-check.ts";
import { isPageLeaving, watchedLeaseBook } from "./lease-watch.ts";
import { Link } from "./link.ts";
import { LivePush } from "./live-push.ts";
import { describeCrash, macrotask, type Process, processClock } from "./process.ts";
import type { Place, TwoPlaceCrash, TwoPlaceOptions, TwoPlaceResult, TwoPlaceScenario } from "./types.ts";
import { judgeWorld } from "./verdict.ts";

export type { Place, TwoPlaceCrash, TwoPlaceOptions, TwoPlaceResult, TwoPlaceScenario } from "./types.ts";

const ctx = BACKGROUND_CONTEXT;
/** One world: both places run until the holder finished, crashing once at `crash` (or never). */
export async function runTwoPlaceWorld<W>(
  scenario: TwoPlaceScenario<W>,
  backend: SweepBackend,
  options: TwoPlaceOptions,
  crash: TwoPlaceCrash | undefined,
): Promise<{
  commits: Record<Place, number>;
  messages: number;
  forked?: boolean;
  /** The object took the lease from the tab whose page said it was leaving, no release heard (decision 0101). */
  takenAtLeaving?: boolean;
  violation?: CrashSweepViolation;
}> {
  const recorder = new Recorder<W>(scenario.world ? scenario.world() : (undefined as W));
  const clock = createManualClock(1_000);
  const { book: arbiter, takenAtLeaving } = watchedLeaseBook(clock, options.ttlMs ?? 5_000);
  // Hand-over messages between the sweep's own places, or the follow link's text frames (`followLink`).
  const link = new Link<HandOverMessage | string>();
  /** The object's kept lease answers (`followLink`): on a Durable Object they are rows, and outlive its crashes. */
  const answers = new Map<string, Json>();
  const commits: Record<Place, number> = { tab: 0, object: 0 };
  /** What each place stored at each log position (a place's storage never loses what it stored: a crash copies it). */
  const stored: Record<Place, StoredLog> = { tab: new Map(), object: new Map() };
  // Worlds where the object may take the lease by its expiry: the tab's unpushed stretch may differ from the
  // object's history at the same positions (a fork of an older epoch; nothing with an effect may be in it).
  const takeover = options.stayAway === true || options.partition !== undefined;
  const log: string[] = [];
  let split: string | undefined;
  /** With `workerStaysAlive`: the tab's lease ends by then (decision 0113); a tab commit stored at or after it, if any. */
  let tabEndsBy = Number.POSITIVE_INFINITY;
  let late: string | undefined;
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
  /** Every image a crash left, by place: copies whose rows must all be in the end's history. */
  const atEnd: Array<{ place: Place; storage: Storage }> = [];
  /** Who holds the log at the end: the object (it took over), or the tab (it finished with the object following). */
  let ending: Place = "object";
  let left = false;
  let tabDone = false;
  let turn = 0;
  const partitioned = () => options.partition !== undefined && turn > options.partition.from && turn <= options.partition.to;
  const offline = () => Promise.reject(new TypeError("Failed to fetch (the tab is partitioned from the object)"));
  // The tab reaches the arbiter (which lives with the object) only while the link is up.
  const tabArbiter: LeaseArbiter = {
    acquire: (place, head, epoch) => (partitioned() ? offline() : arbiter.acquire(place, head, epoch)),
    renew: (place, epoch) => (partitioned() ? offline() : arbiter.renew(place, epoch)),
    release: (place, epoch, position, heir) => (partitioned() ? offline() : arbiter.release(place, epoch, position, heir)),
  };
  const objectHolds = () => processes.object?.alive === true && processes.object.arrival?.harness !== undefined;
  const tabPins = () => arbiter.record.holder === "tab" && !Number.isFinite(arbiter.record.expiresAt);

  const crashNow = async (place: Place, scripted = false) => {
    const process = processes[place]!;
    if (!scripted) crashed = true;
    process.alive = false;
    link.attach(place, undefined);
    // What the tab had sent and the link had not delivered dies with it (its socket's buffer) — but for its page's
    // `lease.leaving` (decision 0101), sent on the page's own socket, which outlives the worker.
    if (place === "tab" && options.stayAway) link.drop((item) => item.to === "object" && !isPageLeaving(item.message));
    log.push(scripted ? `-- the ${place} dies as the scenario says --` : `-- crash of the ${place} --`);
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
        if (place === "tab" && clock.now() >= tabEndsBy) late ??= `the tab stored ${what} at ${clock.now()}, ending by ${tabEndsBy}`;
        if (!batch?.fence) return;
        const { epoch, position } = batch.fence;
        const text = JSON.stringify({ ...batch, fence: undefined });
        stored[place].set(position, { epoch, text });
        const other = stored[place === "tab" ? "object" : "tab"].get(position);
        if (!other || other.text === text) return;
        const [tabs, objects] = place === "tab" ? [epoch, other.epoch] : [other.epoch, epoch];
        if (!(takeover && tabs < objects))
          split ??= `position ${position} holds two different transactions (the tab's of epoch ${tabs}, the object's of epoch ${objects})`;
      },
      (bytes) => {
        process.image = bytes;
        void crashNow(place);
      },
    );
    process.storage = store;
    processes[place] = process;
    const pclock = processClock(clock, alive);
    const send = (to: Place) => (message: HandOverMessage | string) => {
      if (process.alive) link.send(to, message);
    };
    recorder.process++;
    const world = recorder.view();
    const open = async (storage: Storage, lease: LeaseOptions) => {
      const harness = await scenario.open("object", storage, pclock, lease, world);
      process.harness = harness;
      if (!harness.readOnly) harness.resume();
      return harness;
    };
    if (place === "object" && options.followLink) {
      const object = await startObjectEnd({ storage: store, book: arbiter, clock: pclock, answers, open, reply: send("tab") });
      process.arrival = object.end;
      if (process.alive) link.attach("object", (frame) => object.receive(frame));
      return;
    }
    if (place === "object") {
      const arrival = await Arrival.start({
        place: "object",
        storage: store,
        arbiter,
        clock: pclock,
        send: send("tab"),
        open,
      });
      process.arrival = arrival;
      if (process.alive) link.attach("object", (message) => arrival.receive(message as HandOverMessage));
      return;
    }
    // A tab cannot take a lease while it cannot reach the arbiter: it opens once the link is up again.
    while (partitioned()) await macrotask();
    if (options.followLink) return bootFollowingTab(process, store, pclock, send("object"), world);
    const push = options.mirror ? new LivePush({ place: "tab", storage: store, clock: pclock, send: send("object") }) : undefined;
    const lease: LeaseOptions = { place: "tab", arbiter: tabArbiter, ...(push ? { confirm: push.acknowledged.confirm } : {}) };
    const harness = await scenario.open("tab", store, pclock, lease, world);
    process.harness = harness;
    if (harness.readOnly) {
      push?.stop();
      tabDone = true; // the lease is the object's: this tab only follows (not part of this sweep)
      return;
    }
    if (push) {
      harness.onLog((batch) => push.logged(batch));
      if (process.alive) link.attach("tab", (message) => push.receive(message as HandOverMessage));
    }
    await scenario.start(harness, world);
    process.started = true;
    harness.resume();
    let checking = false;
    const watch = async () => {
      if (!process.alive || left || checking) return;
      checking = true;
      const leave = await Promise.resolve(scenario.leaveWhen(harness, world)).finally(() => (checking = false));
      if (!leave || !process.alive || left) return;
      left = true;
      push?.stop();
      const mark = await harness.handOver(ctx);
      const departure = new Departure({ place: "tab", storage: store, mark, clock: pclock, send: send("object") });
      if (process.alive) link.attach("tab", (message) => departure.receive(message as HandOverMessage));
      await departure.start();
    };
    process.watch = watch;
  };

  /** The tab on the follow link (`followLink`): the product's FollowLink, lease over it and Mirror. */
  const bootFollowingTab = async (
    process: Process,
    store: Process["storage"],
    pclock: Clock,
    send: (frame: string) => void,
    world: SweepWorld<W>,
  ): Promise<void> => {
    const tab = new FollowingTab(pclock, send);
    if (process.alive) link.attach("tab", (frame) => tab.receive(frame));
    let harness: Harness;
    try {
      harness = await scenario.open("tab", store, pclock, tab.lease, world);
    } catch (error) {
      if (!(error instanceof ConnectionLost) || !process.alive) throw error;
      // The object never answered the open's acquire (it was down, then the link was): the open fails as the worker's
      // does, and the tab is opened again (a reload) once it can reach the object.
      log.push("-- the tab's open could not reach the object: it reloads --");
      process.alive = false;
      link.attach("tab", undefined);
      process.image = await store.crash();
      return;
    }
    process.harness = harness;
    if (harness.readOnly) {
      tabDone = true; // the lease is the object's: this tab only follows (not part of this sweep)
      return;
    }
    tab.mirror(harness);
    await scenario.start(harness, world);
    process.started = true;
    harness.resume();
    let checking = false;
    process.watch = async () => {
      if (!process.alive || left || checking) return;
      checking = true;
      const leave = await Promise.resolve(scenario.leaveWhen(harness, world)).finally(() => (checking = false));
      if (!leave || !process.alive || left) return;
      left = true;
      if (options.workerNeverReleases && options.pageLeaving && options.stayAway && options.workerStaysAlive) {
        tabEndsBy = tab.sayLeaving(harness, true) ?? tabEndsBy; // heard by the worker, which runs on and never releases
        return scenario.leftAt?.(world, tabEndsBy);
      }
      if (options.workerNeverReleases && options.pageLeaving && options.stayAway) {
        // The page says it is leaving; its worker never runs again (decision 0100): it dies with what it stored.
        tab.sayLeaving(harness);
        process.image = await process.storage.crash();
        await crashNow("tab", true);
        return;
      }
      await tab.leave(harness, ctx, options.leaveAtOnce === true, options.pageLeaving === true);
    };
  };

  const restart = async (place: Place, image: Uint8Array) => {
    storages[place] = await backend.fromImage(image);
    atEnd.push({ place, storage: await backend.fromImage(image) });
    if (place === "tab") left &&= tabPins(); // a tab back under its pinned lease after its page left: a new load
    await boot(place);
  };

  try {
    // Not awaited: a crash during a place's open leaves its open hanging for ever, as a dead process's would.
    const start = (place: Place, image?: Uint8Array) =>
      void (image ? restart(place, image) : boot(place)).catch((e: unknown) => (error ??= e));
    start("object");
    start("tab");
    for (let step = 0; ; step++) {
      if (step >= (options.maxSteps ?? 5_000)) return fail("progress", "the world did not finish (a livelock?)");
      for (let i = 0; i < 3; i++) await macrotask();
      for (const place of ["tab", "object"] as const) {
        const process = processes[place]!;
        const image = process?.image;
        if (process && !process.alive && image) {
          // Away until the object took over; a tab that crashed before any lease was granted (its hello or first acquire
          // unanswered) has no lease to wait out, and one holding a pinned lease comes back (no one else may take it).
          if (place === "tab" && options.stayAway && !objectHolds() && arbiter.record.epoch > 0 && !tabPins()) continue;
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
      if ((options.mirror || options.followLink) && tab.alive && (await tabFinished(tab))) {
        ending = "tab";
        break;
      }
      const scheduled = options.schedule?.[turn] ?? { pick: 0, action: "deliver" as const };
      const next = partitioned() ? { pick: scheduled.pick, action: "drop" as const } : scheduled;
      turn++;
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
  if (late) return fail("the tab stops at its page's grace", late);

  async function freeze(place: Place) {
    const process = processes[place]!;
    process.image = await process.storage.crash();
    await crashNow(place);
  }

  /** The tab holds, finished, and the object's copy holds its whole log. */
  async function tabFinished(tab: Process): Promise<boolean> {
    const harness = tab.harness;
    if (!harness || !tab.started || harness.readOnly || harness.closed || !harness.lease) return false;
    const arrival = processes.object?.arrival;
    if (!arrival || arrival.harness || arrival.head < harness.lease.position) return false;
    return isDone(scenario, harness, recorder);
  }

  // The end: the holder's storage holds the history; the other place's and every crash image are copies (verdict.ts).
  for (const process of Object.values(processes)) process!.storage.disarm();
  const holder = processes[ending]!.harness!;
  const other: Place = ending === "object" ? "tab" : "object";
  const judged = await judgeWorld({
    scenario,
    options,
    recorder,
    stored,
    log,
    ending,
    takeover,
    storages,
    copies: [{ place: other, storage: storages[other] }, ...atEnd],
  });
  if ("invariant" in judged) return fail(judged.invariant, judged.detail);
  const forked = judged.forked;
  await holder.close(ctx).catch(() => {});
  return { commits, messages, forked, takenAtLeaving: takenAtLeaving() };
}

async function isDone<W>(scenario: TwoPlaceScenario<W>, harness: Harness, recorder: Recorder<W>): Promise<boolean> {
  if (scenario.done) return scenario.done(harness, recorder.view());
  return harness.quiet;
}

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
  let forks = baseline.forked ? 1 : 0;
  let takenAtLeaving = baseline.takenAtLeaving ? 1 : 0;
  for (const point of points) {
    const result = await runTwoPlaceWorld(scenario, backend, options, point);
    if (result.violation) throw result.violation;
    if (result.forked) forks++;
    if (result.takenAtLeaving) takenAtLeaving++;
  }
  return { commits: baseline.commits, messages: baseline.messages, worlds: points.length, forks, takenAtLeaving };
}
