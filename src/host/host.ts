/**
 * The runtime-neutral host: given storage it can open, it owns one harness and serves `HarnessService` — status,
 * tasks, conversations, views, reports, read-only SQL, crash points and the app's extra methods. It imports
 * no DOM, Worker or Node API; a runtime adapter (the browser worker, a Durable Object) hands it the storage,
 * the ownership rules and a clock, and carries its methods over a transport (`hostEndpoint`).
 */
import { coalesceLiveFrames, type LivePace } from "../agent/view/live-frames.ts";
import { BACKGROUND_CONTEXT as ctx } from "../base/context.ts";
import type { Json } from "../base/json.ts";
import { CrashPointsOff, DurableError, HarnessClosed, UnknownAppMethod, UnknownTaskKind } from "../errors.ts";
import { dismissFork, listForks } from "../follow/fork.ts";
import type { PageCallPort } from "../follow/page-call-relay.ts";
import { Harness, type HarnessOptions, type Inspection } from "../harness.ts";
import { checkJson } from "../limits.ts";
import type { Report } from "../reports.ts";
import type { Storage } from "../storage/storage.ts";
import { serializeError } from "./error-wire.ts";
import { Listeners, safely } from "./listeners.ts";
import type { Ownership } from "./ownership.ts";
import { pageCallMethods } from "./page-calls.ts";
import type { CrashPointHit, ErrorShape, HarnessService, HarnessStatus } from "./protocol.ts";

/** An extra method the page can call with `client.call(name, ...args)`; it gets the open harness. */
export type HostMethod = (harness: Harness, ...args: Json[]) => unknown;

export interface HostOptions {
  /** How statuses name the database (for example "default pool:/pi-durable.sqlite3"). */
  database: string;
  /** Opens the runtime's storage; called once this instance owns the database. */
  openStorage: () => Promise<Storage>;
  /** Registry, settings, models, env, resume… for `Harness.open`; the host adds `onReport` and `crashPoint`. */
  harness: Omit<HarnessOptions, "onReport" | "crashPoint">;
  /** Who may open the database (Web Locks in a browser). Default: this instance owns it outright. */
  ownership?: Ownership;
  /** Extra methods for `client.call(name, ...args)`. */
  methods?: Record<string, HostMethod>;
  /**
   * The page leaves (`leave`): a host under its object's lease hands it over (decision 0035). True once the object
   * took it: the host then opens its harness again on the same storage, read-only, so a page that stays follows the
   * object live and may `runHere` (decision 0045).
   */
  leave?: () => Promise<boolean>;
  /**
   * `runHere`: a host under its object's lease whose harness is read-only asks for the lease back; resolves once the
   * object released it here and the storage holds everything up to the release (decision 0038). The host then
   * opens its harness again on the same storage (under the lease: writable now), and the page's views move to it.
   */
  takeBack?: () => Promise<void>;
  /**
   * A host whose storage can be rebuilt from elsewhere (decision 0047: a worker following its object with
   * `follow.rebuild`): each time `when`'s listener is called the host closes its harness, awaits `run(storage)` (the
   * copy replaced from the object's snapshot), opens the harness again on it and moves the page's views there.
   */
  rebuild?: { when(listener: () => void): void; run(storage: Storage): Promise<void> };
  /**
   * Tells the host each time a fork was kept in its storage (decision 0039: a worker following its object), so
   * the ready status counts it (`forks`).
   */
  onFork?: (listener: () => void) => void;
  /**
   * Where the page's page tool calls go while the conversation runs elsewhere (decision 0044: a worker following its
   * object claims, answers and releases them at the object); undefined, or returning undefined: the harness here.
   */
  pageCallsElsewhere?: () => PageCallPort | undefined;
  /** Called once the harness is open, before the host reports it ready to `ready` (not to the status). */
  onReady?: (harness: Harness) => void | Promise<void>;
  /**
   * Whether `armCrashPoint` may stop the harness at a named crash point (the test hook of
   * pi-durable-web/testing and crash tests). Default true; false makes it reject with `CrashPointsOff`.
   */
  crashPoints?: boolean;
  /** A monotonic clock in ms, for `openMs` in the ready status. */
  now: () => number;
  /**
   * The pace of live view updates (partial answers, tool output) on the clock `now`: at most one per
   * `frameMs`, a timer for the rest of a frame. Default: each one at once.
   */
  liveFrames?: Omit<LivePace, "now">;
}

/** A host and its life. */
export interface ServedHost {
  service: HarnessService;
  /** Resolves with the harness once it is open (rejects if opening failed). */
  ready: Promise<Harness>;
  /** How many listeners the host holds for subscriptions (status, reports, tasks, conversation views). */
  listenerCount(): number;
}

/** Keeps at most this many reports for a listener that subscribes late. */
const RECENT_REPORTS = 200;

export function createHost(options: HostOptions): ServedHost {
  const { database, ownership } = options;
  let status: HarnessStatus = { kind: "starting" };
  const statuses = new Listeners<HarnessStatus>();
  const reports = new Listeners<Report>();
  const taskGraphs = new Listeners<Inspection>();
  let views = 0;
  const recentReports: Report[] = [];
  let crashPoint: { name: string; reached: (hit: CrashPointHit) => void } | undefined;
  /** Phases stopped at a crash point, waiting for the test to crash the host; a clean close ends them. */
  const stopped = new Set<(error: unknown) => void>();
  let harness: Harness | undefined;
  let storage: Storage | undefined;
  let release: (() => void) | undefined;
  let closing: Promise<void> | undefined;

  const setStatus = (next: HarnessStatus) => {
    status = next;
    statuses.emit(next);
  };

  const onReport = (report: Report) => {
    const shaped = report.kind === "error" ? { ...report, error: errorShape(report.error) } : report;
    recentReports.push(shaped);
    if (recentReports.length > RECENT_REPORTS) recentReports.shift();
    reports.emit(shaped);
  };

  const stopAtCrashPoint: HarnessOptions["crashPoint"] = async (name, at) => {
    if (crashPoint?.name !== name) return;
    const { reached } = crashPoint;
    crashPoint = undefined;
    reached({ name, ...at });
    // Stop here: the test crashes the host now. Only a clean close ends the stop (it waits for every running
    // phase, so it would wait forever otherwise).
    await new Promise<never>((_, reject) => stopped.add(reject));
  };

  /** Opens the harness (on `reuse`, the storage already open, when the host opens it again: `runHere`). */
  const open = async (reuse?: Storage, connectedPages?: readonly string[], readOnly?: true) => {
    setStatus({ kind: "opening", database });
    storage = reuse ?? (await options.openStorage());
    setStatus({ kind: "recovering", database });
    const started = options.now();
    const harnessOptions = { ...options.harness, onReport, crashPoint: stopAtCrashPoint, ...(readOnly ? { readOnly } : {}) };
    // Pages still watching keep the page tool calls they claimed (where the conversation ran before: runHere).
    if (connectedPages) harnessOptions.connectedPages = [...(options.harness.connectedPages ?? []), ...connectedPages];
    harness = await Harness.open(storage, harnessOptions, ctx);
    harness.onCommit(({ batch }) => {
      if (batch.tasks.length > 0) scheduleTaskPublication();
      // A copy that follows another place sees the lease move with the transactions it applies (a takeover, a return).
      if (batch.fence && status.kind === "ready" && status.epoch !== batch.fence.epoch) setStatus({ ...status, epoch: batch.fence.epoch });
    });
    setStatus({
      kind: "ready",
      database,
      recovered: harness.recovery.tasks.map((task) => task.id),
      recovery: harness.recovery,
      openMs: options.now() - started,
      ...(options.harness.lease ? { runs: harness.readOnly ? ("elsewhere" as const) : ("here" as const) } : {}),
      ...(await leaseEpoch(harness)),
      ...(await forkCount(storage)),
    });
    await options.onReady?.(harness);
    return harness;
  };

  let publicationScheduled = false;
  const scheduleTaskPublication = () => {
    if (publicationScheduled || taskGraphs.size === 0) return;
    publicationScheduled = true;
    // Coalesce a burst of commits into one view; a view never shows anything uncommitted.
    queueMicrotask(async () => {
      publicationScheduled = false;
      if (!harness || harness.closed) return;
      taskGraphs.emit(await harness.inspect(ctx));
    });
  };

  /**
   * Waits for the database, then opens it. A host that lost it to a takeover runs this again: it waits behind
   * the new owner (its page follows that one meanwhile) and opens once the database is free.
   */
  const acquireAndOpen = async () => {
    const owned = ownership ? await ownership.acquire(() => setStatus({ kind: "waiting-for-lock", database })) : () => {};
    if (!owned) return undefined; // closed while waiting: no open happened
    release = owned;
    try {
      return await open();
    } catch (error) {
      owned();
      throw error;
    }
  };
  const start = () => {
    const attempt = acquireAndOpen();
    attempt.catch((error: unknown) => setStatus({ kind: "failed", error: errorShape(error) }));
    return attempt;
  };
  let opening = start();
  const ready = opening.then((opened) => opened ?? Promise.reject(new HarnessClosed()));
  ready.catch(() => {});

  let closedForGood = false;
  const closeCleanly = (reason: "close" | "takeover") => {
    if (reason === "close") closedForGood = true;
    closing ??= (async () => {
      try {
        if (!release) ownership?.cancel(); // still waiting for the database: stop waiting, nothing to close
        await opening.catch(() => {}); // an open in progress finishes first, then is closed
        if (harness) {
          const closed = harness.close(ctx); // first, so a released phase ends without counting as a failure
          for (const end of stopped) end(new HarnessClosed());
          stopped.clear();
          await closed;
        }
        if (storage) await storage.close();
      } finally {
        setStatus({ kind: "closed", reason });
        release?.();
      }
      if (reason === "takeover" && ownership && !closedForGood) {
        // Not a dead end: queue for the database again, behind the tab that took it.
        harness = undefined;
        storage = undefined;
        release = undefined;
        closing = undefined;
        opening = start();
      }
    })();
    return closing;
  };

  // Only the owner acts on a takeover request (an instance that is waiting too ignores it); an owner still
  // opening closes as soon as its open is done.
  ownership?.onTakeoverRequest(() => {
    if (release && !closing) void closeCleanly("takeover");
  });

  // A fork kept while the harness is ready: the status counts it (decision 0039).
  const recountForks = async () => {
    if (!storage || status.kind !== "ready") return;
    const { forks, ...rest } = status;
    setStatus({ ...rest, ...(await forkCount(storage)) });
  };
  options.onFork?.(() => void recountForks().catch(() => {}));

  /** The page's conversation views and page tool watches: moved to the new harness when the host opens it again. */
  const liveViews = new Set<(next: Harness) => void>();
  let reopening: Promise<void> | undefined;
  /**
   * Opens the harness again on its storage (after the lease came back here, or `between` rebuilt it): views follow.
   * A failed `between` still opens it again (on the storage as it was) and then rejects. An open that could not ask
   * for the lease (the object's link down past a call's timeout) opens read-only instead — nothing is written
   * without the lease, and the page may ask again — and resolves with that error.
   */
  const reopen = async (between?: () => Promise<void>): Promise<unknown> => {
    const old = harness!;
    harness = undefined;
    await old.close(ctx);
    let failed: unknown;
    try {
      await between?.();
    } finally {
      const pages = pageCalls.watchingPages();
      const next = await open(storage, pages).catch((error: unknown) => {
        if (!options.harness.lease || harness) throw error; // opened, and failed after: not a second harness
        failed = error;
        return open(storage, pages, true);
      });
      for (const rebind of liveViews) rebind(next);
    }
    return failed;
  };
  options.rebuild?.when(() => {
    if (!harness || closing) return;
    const rebuild = options.rebuild!;
    reopening ??= reopen(() => rebuild.run(storage!))
      .then(recountForks)
      .catch(() => {}) // not rebuilt (the object unreachable, its snapshot refused): the copy stays as it was
      .finally(() => {
        reopening = undefined;
      });
  });

  const requireHarness = () => {
    if (!harness || status.kind !== "ready") throw new DurableError(`The database is not open (status: ${status.kind}).`);
    return harness;
  };

  /**
   * The open harness once a reopen under way (a rebuild, decision 0053) is done: a page's call made in that window
   * waits for it instead of failing with "not open".
   */
  const whenOpen = async () => {
    while (reopening) await reopening.catch(() => {});
    return requireHarness();
  };

  const pageCalls = pageCallMethods({
    requireHarness,
    reopening: () => reopening !== undefined,
    rebinds: liveViews,
    ...(options.pageCallsElsewhere ? { elsewhere: options.pageCallsElsewhere } : {}),
  });

  const host: HarnessService = {
    status: () => status,
    lifeLock: () => ownership?.lifeLock() ?? Promise.resolve(undefined),
    onStatus(listener) {
      const unsubscribe = statuses.add(listener);
      safely(() => listener(status));
      return unsubscribe;
    },
    onReport(listener) {
      const unsubscribe = reports.add(listener);
      for (const report of recentReports) safely(() => listener(report));
      return unsubscribe;
    },
    watchTasks(listener) {
      const unsubscribe = taskGraphs.add(listener);
      let subscribed = true;
      if (harness) void harness.inspect(ctx).then((inspection) => subscribed && safely(() => listener(inspection)));
      return () => {
        subscribed = false;
        unsubscribe();
      };
    },
    async createTask(kind, input, createOptions = {}) {
      const open = await whenOpen();
      const definition = open.registry.task(kind);
      if (!definition)
        throw new UnknownTaskKind(
          kind,
          open.registry.extensions.flatMap((e) => (e.tasks ?? []).map((t) => t.name)),
        );
      const conversation =
        createOptions.conversationId !== undefined ? open.conversation(createOptions.conversationId) : await open.root(ctx);
      return conversation.commit(
        (tx) => tx.createTask(definition, input, createOptions.key !== undefined ? { key: createOptions.key } : {}),
        ctx,
      );
    },
    getTask: async (id) => (await whenOpen()).getTask(id, ctx),
    waitForTask: async (id) => (await whenOpen()).waitForTask(id, ctx),
    abortTask: async (id) => (await whenOpen()).abortTask(id, ctx),
    inspect: async () => (await whenOpen()).inspect(ctx),
    resume: () => requireHarness().resume(),
    // On the commit line: storage.query() switches the connection to query_only around the statement, and a
    // commit that slipped in between would fail with SQLITE_READONLY.
    query: async (sql, ...params) => (await whenOpen()).query(sql, ...params),
    async exportDatabase() {
      requireHarness();
      return storage!.exportImage();
    },
    async armCrashPoint(name) {
      if (options.crashPoints === false) throw new CrashPointsOff(name);
      return new Promise<CrashPointHit>((reached) => (crashPoint = { name, reached }));
    },
    disarmCrashPoint() {
      crashPoint = undefined;
    },
    close: () => closeCleanly("close"),
    requestTakeover() {
      ownership?.requestTakeover();
    },
    async runHere() {
      const current = requireHarness();
      if (!current.readOnly || !options.takeBack || closing) return;
      reopening ??= (async () => {
        await options.takeBack!();
        const failed = await reopen();
        if (failed !== undefined) throw failed; // opened read-only: the page may ask again
      })().finally(() => {
        reopening = undefined;
      });
      return reopening;
    },
    async leave() {
      const handedOver = options.leave?.();
      if (status.kind === "ready" && status.runs === "here") setStatus({ ...status, runs: "elsewhere" });
      // Within this task the rest and the release went out (all a closing page may send); the rest is for a page
      // that stays: its harness, stopped at the hand-over, opens again read-only and follows the object.
      if (!(await handedOver)) {
        // The object took nothing (offline): the harness runs here still, and the status says so again.
        const current = harness;
        if (current && !current.readOnly && !current.closed && status.kind === "ready" && status.runs === "elsewhere")
          setStatus({ ...status, runs: "here" });
        return;
      }
      if (closing) return;
      reopening ??= reopen()
        .then(() => {}) // read-only either way: the object took the lease
        .finally(() => {
          reopening = undefined;
        });
      return reopening;
    },
    async forks() {
      requireHarness();
      return listForks(storage!);
    },
    async dismissFork(id) {
      requireHarness();
      await dismissFork(storage!, id);
      await recountForks();
    },
    async rootConversation(agent) {
      return (await (await whenOpen()).root(ctx, agent ? { agent } : {})).id;
    },
    async createConversation(agent) {
      return (await (await whenOpen()).createConversation(agent ? { agent } : {}, ctx)).id;
    },
    async listConversations() {
      const open = await whenOpen();
      return open
        .conversationIds()
        .sort((a, b) => a - b)
        .map((id) => {
          const conversation = open.conversation(id);
          return { id, agent: conversation.agent(), busy: conversation.busy };
        });
    },
    configure: async (conversationId, change) => (await whenOpen()).conversation(conversationId).configure(change, ctx),
    async submit(conversationId, draft) {
      return (await (await whenOpen()).conversation(conversationId).submit(draft, ctx)).id;
    },
    async waitForSubmission(submissionId) {
      return (await (await whenOpen()).submission(submissionId, ctx)).wait(ctx);
    },
    abortConversation: async (conversationId) => (await whenOpen()).conversation(conversationId).abort(ctx),
    decide: async (conversationId, call, decision) => (await whenOpen()).conversation(conversationId).decide(call, decision, ctx),
    pendingApprovals: async (conversationId) => (await whenOpen()).conversation(conversationId).pendingApprovals(),
    watchPageCalls: pageCalls.watchPageCalls,
    claimPageCall: pageCalls.claimPageCall,
    answerPageCall: pageCalls.answerPageCall,
    compact: async (conversationId, instructions) =>
      (await whenOpen()).conversation(conversationId).compact(instructions ? { instructions } : {}, ctx),
    watchConversation(conversationId, listener) {
      const pace = options.liveFrames && { ...options.liveFrames, now: options.now };
      const send = coalesceLiveFrames((update) => safely(() => listener(update)), pace);
      // While the host reopens (a rebuild), the watch starts on the harness it opens next (`rebind`).
      let unsubscribe = () => {};
      try {
        unsubscribe = requireHarness().conversation(conversationId).watch(send);
      } catch (error) {
        if (!reopening) throw error;
      }
      const rebind = (next: Harness) => {
        unsubscribe();
        unsubscribe = next.conversation(conversationId).watch(send);
      };
      liveViews.add(rebind);
      views += 1;
      let subscribed = true;
      return () => {
        if (!subscribed) return;
        subscribed = false;
        views -= 1;
        liveViews.delete(rebind);
        unsubscribe();
      };
    },
    conversationEntries: async (conversationId, beforeId, limit) =>
      (await whenOpen()).conversation(conversationId).entriesBefore(beforeId, limit, ctx),
    async call(method, ...args) {
      const open = requireHarness();
      // Own properties only: `constructor`, `toString` or `__proto__` are no app method.
      const methods = options.methods;
      const implementation = methods && typeof method === "string" && Object.hasOwn(methods, method) ? methods[method] : undefined;
      if (typeof implementation !== "function") throw new UnknownAppMethod(String(method));
      checkJson(args, open.settings.limits, () => `The argument list of ${method}`);
      return implementation(open, ...args);
    },
  };

  return { service: host, ready, listenerCount: () => statuses.size + reports.size + taskGraphs.size + views };
}

/** An error for a status or a report: its serialized form without the stack (statuses and reports are kept). */
function errorShape(error: unknown): ErrorShape {
  const { stack: _stack, ...shape } = serializeError(error);
  return shape;
}

/** The ready status's `forks`: how many forks `storage` keeps, absent when none. */
/** The lease epoch this harness writes under, or else the epoch of its log's head (absent without a log). */
async function leaseEpoch(harness: Harness): Promise<{ epoch?: number }> {
  const epoch = harness.lease?.epoch ?? (await harness.storage.readEpochs?.())?.at(-1)?.epoch;
  return epoch === undefined ? {} : { epoch };
}

async function forkCount(storage: Storage): Promise<{ forks?: number }> {
  const count = (await listForks(storage)).length;
  return count > 0 ? { forks: count } : {};
}
