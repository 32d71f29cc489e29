/**
 * The runtime-neutral host: given storage it can open, it owns one harness and serves `HarnessService` — status,
 * tasks, conversations, views, reports, read-only SQL, crash points and the app's extra methods. It imports
 * no DOM, Worker or Node API; a runtime adapter (the browser worker, a Durable Object) hands it the storage,
 * the ownership rules and a clock, and carries its methods over a transport (`hostEndpoint`). The calls that only
 * reach the open harness are in harness-methods.ts; here is the harness's life (open, reopen, close, the lease's moves).
 */
import { BACKGROUND_CONTEXT as ctx } from "../base/context.ts";
import { safely } from "../base/safely.ts";
import { CrashPointsOff, HarnessClosed } from "../errors.ts";
import { dismissFork, listForks } from "../follow/fork.ts";
import { Harness, type HarnessOptions } from "../harness.ts";
import { releaseStorage } from "../harness-lifecycle.ts";
import type { Storage } from "../storage/storage.ts";
import { CrashStops } from "./crash-stops.ts";
import { harnessCalls } from "./harness-methods.ts";
import { closeInOrder } from "./host-close.ts";
import { hostLeave } from "./host-leave.ts";
import type { HostOptions, ServedHost } from "./host-options.ts";
import { hostReads } from "./host-reads.ts";
import { hostReopen } from "./host-reopen.ts";
import { hostTaskGraphs } from "./host-task-graphs.ts";
import { hostViews } from "./host-views.ts";
import { Listeners } from "./listeners.ts";
import { pageCallMethods } from "./page-calls.ts";
import type { HarnessService, HarnessStatus, HeldBy, RebuildStopped } from "./protocol.ts";
import { RecentReports } from "./recent-reports.ts";
import { ReopenQueue } from "./reopen-queue.ts";
import { errorShape, forkCount, leaseEpoch, notOpen, notOpened, openWaits, recoveryParts } from "./status-parts.ts";

export type { HostMethod } from "./harness-methods.ts";
export type { HostOptions, ServedHost } from "./host-options.ts";

export function createHost(options: HostOptions): ServedHost {
  const { database, ownership } = options;
  let status: HarnessStatus = { kind: "starting" };
  const statuses = new Listeners<HarnessStatus>();
  const reports = new RecentReports();
  /** The page's conversation views and page tool watches: moved to each harness the host opens next (0140: a takeover's too). */
  const liveViews = hostViews();
  const taskGraphs = hostTaskGraphs(() => harness, liveViews.rebinds);
  const crashStops = new CrashStops();
  let harness: Harness | undefined;
  let storage: Storage | undefined;
  let release: (() => void) | undefined;
  let closing: Promise<void> | undefined;
  /** Who holds the lease while the work runs elsewhere, as the object last said (decision 0057). */
  let heldBy: HeldBy | undefined;
  /** A fork was reported while the status was not ready (an open or a reopen under way): the open counts it at its end. */
  let forksReported = false;
  /** The copy's rebuild the worker stopped retrying (decision 0078): shown while the copy is read-only. */
  let rebuildStopped: RebuildStopped | undefined;

  /** Each harness's options: the storage's claim (harness-lifecycle.ts), let go by a read-only copy kept open (0127). */
  const claims = new WeakMap<Harness, object>();
  const opens = openWaits(); // the open's waits (decision 0138)
  const setStatus = (next: HarnessStatus) => {
    status = next;
    opens.moved();
    statuses.emit(next);
  };

  /** Opens the harness (on `reuse`, the storage already open, when the host opens it again: `runHere`). */
  const open = async (reuse?: Storage, connectedPages?: readonly string[], readOnly?: true) => {
    setStatus({ kind: "opening", database });
    storage = reuse ?? (await options.openStorage());
    setStatus({ kind: "recovering", database });
    const started = options.now();
    const harnessOptions: HarnessOptions = {
      ...options.harness,
      onReport: reports.report,
      crashPoint: crashStops.stop,
      onLeaseLost: (_, stopped) => fenced(opened, stopped),
      ...(readOnly ? { readOnly } : {}),
    };
    // A read-only harness runs no task, and Harness.open refuses `resume` beside `readOnly` (InvalidSetting): the
    // browser worker opens with `resume: true`, so every read-only reopen here (a fenced harness, an unanswered leave,
    // a runHere that could not ask for the lease) failed in the tab, twice, and left no harness (decision 0057's
    // follow-up, 2026-12-05 fence).
    if (readOnly) delete harnessOptions.resume;
    // Pages still watching keep the page tool calls they claimed (where the conversation ran before: runHere).
    if (connectedPages) harnessOptions.connectedPages = [...(options.harness.connectedPages ?? []), ...connectedPages];
    const opened = (harness = await Harness.open(storage, harnessOptions, ctx));
    claims.set(opened, harnessOptions);
    reopens.opened(); // the copy it replaces stops answering reads (decision 0127)
    if (!opened.readOnly) rebuildStopped = undefined; // its copy writes here: nothing to rebuild
    harness.onCommit(({ batch }) => {
      if (batch.tasks.length > 0) taskGraphs.schedule();
      // A copy that follows another place sees the lease move with the transactions it applies (a takeover, a return).
      if (batch.fence && status.kind === "ready" && status.epoch !== batch.fence.epoch) setStatus({ ...status, epoch: batch.fence.epoch });
    });
    const openMs = options.now() - started;
    forksReported = false; // a fork reported from here on may come after the count below read the storage
    const parts = { ...(await recoveryParts(opened, options.nextTurn)), ...(await leaseEpoch(opened)), ...(await forkCount(storage)) };
    if (harness !== opened) return opened; // reopened meanwhile (lease lost, a leave): it tells its own (0128's review, M1)
    setStatus({
      kind: "ready",
      database,
      ...parts,
      openMs,
      ...(options.harness.lease ? { runs: opened.readOnly ? ("elsewhere" as const) : ("here" as const) } : {}),
      ...(options.harness.lease && opened.readOnly && heldBy ? { heldBy } : {}),
      ...(opened.readOnly && rebuildStopped ? { rebuild: rebuildStopped } : {}),
    });
    // A fork reported while this open read its count or before it (the status not ready: recountForks could not
    // count it) is counted now (decision 0070): before, it waited for something else to recount.
    if (forksReported) await recountForks();
    await options.onReady?.(harness);
    return harness;
  };

  /**
   * Waits for the database, then opens it. A host that lost it to a takeover runs this again: it waits behind
   * the new owner (its page follows that one meanwhile) and opens once the database is free.
   */
  const acquireAndOpen = async (afterTakeover: boolean) => {
    const owned = ownership ? await ownership.acquire(() => setStatus({ kind: "waiting-for-lock", database })) : () => {};
    if (!owned) return undefined; // closed while waiting: no open happened
    release = owned;
    let opened: Harness;
    try {
      // After a takeover, the pages still watching keep their claims (review of 0140, M1): the tab that asked may never
      // have opened (its open failed, it closed while it waited), and nothing else swept. `pageCalls` exists by then.
      opened = await open(undefined, afterTakeover ? pageCalls.watchingPages() : undefined);
    } catch (error) {
      owned();
      throw error;
    }
    // The views kept across a takeover go on here (decision 0140; before, silent on the closed harness for good). A
    // close or another takeover meanwhile: they end with the close for good, or move at the next open. Opened and
    // reopened meanwhile (a fenced stop): that reopen moves them.
    if (harness === opened && !closing) liveViews.move(opened);
    return opened;
  };
  const start = (afterTakeover = false) => {
    const attempt = acquireAndOpen(afterTakeover);
    attempt.catch((error: unknown) => {
      const ended = notOpened(error, setStatus); // the status `failed`
      // No harness will come: the views kept across a takeover end with the open's error (one that opened and failed
      // after: they move to it, as at a reopen).
      if (!closing) liveViews.move(harness && !harness.closed ? harness : ended);
    });
    return attempt;
  };
  let opening = start();
  const ready = opening.then((opened) => opened ?? Promise.reject(new HarnessClosed()));
  ready.catch(() => {});

  let closedForGood = false;
  /** Bumped by every close and takeover: a reopen started before one opens nothing (review of 0125, M1). */
  let generation = 0;
  /** Told at every close and takeover: a take-back under way stops waiting (decision 0130). */
  const closes = new Listeners<void>();
  const unlessClosed = (work: Promise<void>) =>
    new Promise<void>((resolve, reject) => {
      const stop = closes.add(() => reject(new HarnessClosed()));
      work.then(resolve, reject).finally(stop);
    });
  const closeCleanly = (reason: "close" | "takeover") => {
    if (reason === "close") closedForGood = true;
    generation++;
    closes.emit();
    closing ??= (async () => {
      try {
        await closeInOrder({
          waiting: () => !release,
          cancelWait: () => ownership?.cancel(),
          opening: () => opening,
          reopening: () => reopens.reopening(),
          harness: () => harness,
          endCrashStops: () => crashStops.end(new HarnessClosed()),
          storage: () => storage,
          beforeStorageClose: reason === "close" ? options.beforeStorageClose : undefined,
        });
      } finally {
        setStatus({ kind: "closed", reason });
        release?.();
        // Closed for good, no harness will come: every view ends, `lost` with HarnessClosed (decision 0140). After a
        // takeover they wait, silent on the closed harness, and move to the one the host opens next.
        if (closedForGood) liveViews.move(new HarnessClosed());
      }
      if (reason === "takeover" && ownership && !closedForGood) {
        // Not a dead end: queue for the database again, behind the tab that took it.
        harness = undefined;
        storage = undefined;
        release = undefined;
        closing = undefined;
        opening = start(true);
      }
    })();
    opens.moved(); // calls waiting for an open look again: none waits while closing (the review of 0138, L1)
    return closing;
  };

  // Only the owner acts on a takeover request (a waiting instance ignores it); an owner still opening closes once it opened.
  ownership?.onTakeoverRequest(() => {
    if (release && !closing) void closeCleanly("takeover");
  });

  // A fork kept while the harness is ready: the status counts it (decision 0039); one kept at any other time, once
  // the open under way is ready (decision 0070).
  const recountForks = async () => {
    if (!storage || status.kind !== "ready") {
      forksReported = true;
      return;
    }
    const { forks, ...rest } = status;
    setStatus({ ...rest, ...(await forkCount(storage)) });
  };
  options.onFork?.(() => void recountForks().catch(() => {}));

  // The holder the object names (decision 0057): shown while the work runs elsewhere, never while it runs here.
  options.onHolder?.((holder) => {
    heldBy = holder && { kind: holder.object ? "object" : "tab", place: holder.place };
    if (status.kind !== "ready" || status.runs !== "elsewhere") return;
    const { heldBy: _old, ...rest } = status;
    setStatus(heldBy ? { ...rest, heldBy } : rest);
  });

  const reopens = hostReopen({
    harness: () => harness,
    drop: () => void (harness = undefined),
    generation: () => generation,
    closedForGood: () => closedForGood,
    open: (readOnly) => open(storage, pageCalls.watchingPages(), readOnly),
    leased: options.harness.lease !== undefined,
    unclaim: (copy) => releaseStorage(storage!, claims.get(copy) ?? copy),
    notOpened: (error) => notOpened(error, setStatus),
    rebinds: liveViews.rebinds,
  });
  const reopen = reopens.reopen;
  /**
   * The harness found its lease lost while it ran (decision 0057: it expired while the tab was away, another place
   * took it): it stopped as after a crash. The host opens it again read-only at once — the page's views move, the
   * status says the work runs elsewhere, and the copy follows the object (its fork, if it has one, is kept and counted
   * as its follow link finds it) — instead of a stopped harness that said "here" until the next load.
   */
  const fenced = (lost: Harness, stopped: Promise<void>) => {
    if (harness !== lost || closing || queue.current || !options.harness.lease) return;
    // Said at once: the stop may take a moment (a phase ending), and the work no longer runs here (0057's Not done).
    if (status.kind === "ready" && status.runs === "here") setStatus({ ...status, runs: "elsewhere", ...(heldBy ? { heldBy } : {}) });
    track(() =>
      stopped
        .then(() => reopen(undefined, true))
        .then(recountForks)
        .catch(() => {}),
    );
  };

  /** Whether `opened` holds its object's lease here (it writes, and its copy is no longer rebuilt from the object's). */
  const holdsLease = (opened: Harness) => options.harness.lease !== undefined && !opened.readOnly;

  const queue: ReopenQueue = new ReopenQueue({
    closing: () => closing !== undefined,
    // Refused when the harness holds the lease here (decision 0078): its copy is the one that writes, and the object's
    // snapshot would replace what it wrote since it took the lease. A report from the copy as it was while it followed
    // (its fork found, then kept, while runHere took the lease back; a retry timer set before) arrives late; before,
    // only one queued behind a reopen was checked, and one arriving after closed the writing harness and rebuilt it.
    mayRebuild: () => harness !== undefined && !holdsLease(harness),
    rebuild: () => {
      rebuildStopped = undefined; // trying again: the status says so no more
      // Not rebuilt (the object unreachable, its snapshot refused): the copy stays as it was.
      // Under a lease, opened again read-only (decision 0127): the copy is rebuilt because it does not hold the lease,
      // and the lease asked of the object there (a link call) held every read while no copy was open.
      // A `run` that does not say it closes the copy cannot say when its storage changes: the copy closes first (0132).
      const rebuilt = (closeCopy: () => Promise<void>) =>
        (options.rebuild!.closesCopy ? Promise.resolve() : closeCopy())
          .then(() => options.rebuild!.run(storage!, closeCopy))
          .finally(() => queue.runEnded());
      return reopen(rebuilt, options.harness.lease ? true : undefined)
        .then(recountForks)
        .catch(() => {});
    },
  });
  const track = (work: () => Promise<void>) => queue.track(work);
  const rebuild = () => queue.rebuild();
  options.rebuild?.when(rebuild);
  // The worker stopped asking by itself (decision 0078): the status says so, for the page to show and `retryRebuild()`.
  // Told during the failed rebuild, before its reopen's open: that open's ready status carries it.
  options.rebuild?.stopped?.((tries, error) => {
    rebuildStopped = { kind: "stopped", tries, error: errorShape(error) };
    if (status.kind === "ready" && harness?.readOnly) setStatus({ ...status, rebuild: rebuildStopped });
  });

  const requireHarness = () => {
    if (!harness || status.kind !== "ready") throw notOpen(status);
    return harness;
  };

  /**
   * The open harness once a reopen under way (a rebuild, decision 0053) or the open (0138: a page that cannot see the
   * status) is done: a page's call made in that window waits for it instead of failing with "not open".
   */
  const openUnderWay = () => (closing ? undefined : opens.during(status));
  const whenOpen = async () => {
    for (let under = queue.current ?? openUnderWay(); under; under = queue.current ?? openUnderWay()) await under.catch(() => {});
    return requireHarness();
  };
  const reads = hostReads({
    copy: () => reopens.kept() ?? (harness && !harness.closed && status.kind === "ready" ? harness : undefined),
    switching: () => (closing ? undefined : (queue.current ?? openUnderWay())),
    requireHarness,
  });

  const pageCalls = pageCallMethods({
    requireHarness,
    reopening: () => queue.current !== undefined,
    rebinds: liveViews.rebinds,
    ...(options.pageCallsElsewhere ? { elsewhere: options.pageCallsElsewhere } : {}),
  });

  const { calls: harnessCallsOf, views } = harnessCalls({
    whenOpen,
    ...reads, // `read`, and the `copy` a watch starts on while the host reopens (decision 0134)
    requireHarness,
    // The open under way too: a watch then waits for what it leads to, as a call does (decisions 0138, 0144).
    reopening: () => queue.current !== undefined || openUnderWay() !== undefined,
    rebinds: liveViews.rebinds,
    methods: options.methods,
    liveFrames: options.liveFrames,
    now: options.now,
    follows: (opened) => opened.readOnly && (options.harness.lease !== undefined || options.follows === true),
  });

  const leaving = hostLeave({
    leave: options.leave,
    harness: () => harness,
    closing: () => closing !== undefined,
    status: () => status,
    setStatus,
    holderGone: () => void (heldBy = undefined),
    queue,
    reopen: (readOnly) => track(() => reopen(undefined, readOnly).then(() => {})),
  });

  const host: HarnessService = {
    status: () => status,
    lifeLock: () => ownership?.lifeLock() ?? Promise.resolve(undefined),
    onStatus(listener) {
      const unsubscribe = statuses.add(listener);
      safely(() => listener(status));
      return unsubscribe;
    },
    onReport: (listener) => reports.add(listener),
    watchTasks: taskGraphs.watch,
    ...harnessCallsOf,
    resume: () => requireHarness().resume(),
    // On the commit line: storage.query() switches the connection to query_only around the statement, and a
    // commit that slipped in between would fail with SQLITE_READONLY.
    query: (sql, ...params) => reads.read((copy) => copy.query(sql, ...params)),
    exportDatabase: () => reads.read(() => storage!.exportImage()),
    async armCrashPoint(name) {
      if (options.crashPoints === false) throw new CrashPointsOff(name);
      return crashStops.arm(name);
    },
    disarmCrashPoint: () => crashStops.disarm(),
    close: () => closeCleanly("close"),
    requestTakeover() {
      ownership?.requestTakeover();
    },
    async runHere() {
      // Pressed during a reopen (a rebuild, decision 0053): after it, on the copy it opened (before: "not open", or
      // the rebuild's own promise, taking nothing back).
      await leaving.settled(); // the leave's answer decides whether the lease can come back (review of 0125, L2)
      const current = await whenOpen();
      if (!current.readOnly || !options.takeBack || closing) return;
      if (!queue.current)
        track(async () => {
          const started = generation;
          // Reads answer from the copy meanwhile; writes wait (decision 0127). A close or a takeover ends the wait at
          // once (decision 0130): a take-back whose pushes never come held the queue, and every write, for good.
          await unlessClosed(options.takeBack!()).finally(() => generation !== started && reopens.closedMeanwhile());
          if (generation !== started) throw new HarnessClosed(); // closed or taken over meanwhile: nothing opens, views end
          const failed = await reopen();
          if (failed !== undefined) throw failed; // opened read-only: the page may ask again
        });
      return queue.current;
    },
    async retryRebuild() {
      const current = requireHarness();
      if (!options.rebuild || !rebuildStopped || holdsLease(current) || closing) return;
      options.rebuild.again?.();
      rebuild();
      await queue.current;
    },
    leave: leaving.leave,
    // After a reopen under way (the hand-over's copy: review of 0125, M2), as `query`.
    forks: () => reads.read(() => listForks(storage!)),
    async dismissFork(id) {
      await whenOpen();
      await dismissFork(storage!, id);
      await recountForks();
    },
    watchPageCalls: pageCalls.watchPageCalls,
    claimPageCall: pageCalls.claimPageCall,
    answerPageCall: pageCalls.answerPageCall,
  };

  return { service: host, ready, listenerCount: () => statuses.size + reports.size + taskGraphs.size() + views() };
}
