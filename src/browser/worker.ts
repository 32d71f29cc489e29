/// <reference lib="webworker" />
/**
 * The worker side (`pi-durable-web/worker`): owns the database, runs the scheduler, answers the page.
 *
 *   import { serveHarness } from "pi-durable-web/worker";
 *   serveHarness({ extensions: [myExtension] });   // first statement of the worker module
 *
 * `serveHarness` exposes the host over comlink synchronously (before any await), so no early message from
 * the page is lost. It then waits for the database lock (one owner per database, across tabs), opens the
 * OPFS database, recovers (a reload is the crash), and resumes scheduling.
 */
import * as Comlink from "comlink";
import { BACKGROUND_CONTEXT as ctx } from "../context.ts";
import { DurableError, HarnessClosed, UnknownTaskKind } from "../errors.ts";
import { Harness, type HarnessOptions, type Inspection } from "../harness.ts";
import type { Json } from "../json.ts";
import type { Report } from "../reports.ts";
import type { Settings } from "../settings.ts";
import { openSqliteStorage } from "../storage/sqlite/open-storage.ts";
import type { SqliteStorage } from "../storage/sqlite/storage.ts";
import { DEFAULT_DATABASE_PATH } from "../storage/sqlite/wasm.ts";
import { createRegistry, type Extension, type Registry } from "../tasks/registry.ts";
import type { CrashPointHit, ErrorShape, HarnessHost, HarnessStatus } from "./protocol.ts";

// Files for tools in a browser worker: `serveHarness({ env: opfsEnvs(), … })` (one OPFS directory per conversation).
export { OpfsEnv, opfsEnvs } from "../env/opfs.ts";

export interface ServeHarnessOptions {
  /** Extensions to install (task definitions, tools, hooks). */
  extensions?: Extension[];
  /** Or a registry of your own; `extensions` are installed into it. */
  registry?: Registry;
  /** The database's name in the OPFS pool. Default "/pi-durable.sqlite3". */
  path?: string;
  /** The OPFS directory of the pool (separate apps on one origin keep apart). */
  poolDirectory?: string;
  settings?: Settings;
  models?: unknown;
  env?: HarnessOptions["env"];
  /** Start scheduling as soon as the database is open (default true: a reload carries on by itself). */
  autoResume?: boolean;
  /** Extra methods the page can call with `client.call(name, ...args)`; they get the open harness. */
  methods?: Record<string, (harness: Harness, ...args: Json[]) => unknown>;
  /** Called once the harness is open (for example to start app work). */
  onReady?: (harness: Harness) => void | Promise<void>;
}

/** The handle a worker keeps; mostly for the worker's own code and tests. */
export interface ServedHarness {
  /** Resolves with the harness once the database is open (rejects if opening failed). */
  ready: Promise<Harness>;
}

export function serveHarness(options: ServeHarnessOptions = {}): ServedHarness {
  const path = options.path ?? DEFAULT_DATABASE_PATH;
  const database = `${options.poolDirectory ?? "default pool"}:${path}`;
  const lockName = `pi-durable-web:${database}`;
  const registry = options.registry ?? createRegistry();
  for (const extension of options.extensions ?? []) registry.install(extension);

  let status: HarnessStatus = { kind: "starting" };
  const statusListeners = new Set<(status: HarnessStatus) => void>();
  const reportListeners = new Set<(report: Report) => void>();
  const taskListeners = new Set<(inspection: Inspection) => void>();
  const recentReports: Report[] = [];
  let crashPoint: { name: string; listener: (hit: CrashPointHit) => void } | undefined;
  /** Phases stopped at a crash point, waiting for the page to crash the worker; a clean close ends them. */
  const stopped = new Set<(error: unknown) => void>();
  let harness: Harness | undefined;
  let storage: SqliteStorage | undefined;
  let releaseLock: (() => void) | undefined;
  let closing: Promise<void> | undefined;
  // eslint-disable-next-line prefer-const -- assigned once the lock wait starts, read by closeCleanly
  let opening: Promise<void> | undefined;

  const setStatus = (next: HarnessStatus) => {
    status = next;
    for (const listener of statusListeners) safely(() => listener(next));
  };

  const onReport = (report: Report) => {
    const shaped = report.kind === "error" ? { ...report, error: errorShape(report.error) } : report;
    recentReports.push(shaped);
    if (recentReports.length > 200) recentReports.shift();
    for (const listener of reportListeners) safely(() => listener(shaped));
  };

  let ready!: (harness: Harness) => void;
  let failed!: (error: unknown) => void;
  const readyPromise = new Promise<Harness>((resolve, reject) => {
    ready = resolve;
    failed = reject;
  });
  readyPromise.catch(() => {});

  const open = async () => {
    setStatus({ kind: "opening", database });
    storage = await openSqliteStorage({ vfs: "opfs-sahpool", path, poolDirectory: options.poolDirectory });
    setStatus({ kind: "recovering", database });
    const started = performance.now();
    harness = await Harness.open(
      storage,
      {
        registry,
        settings: options.settings,
        models: options.models,
        env: options.env,
        onReport,
        // A reload carries on by itself: tasks the crash left running are taken again directly.
        resume: options.autoResume !== false,
        crashPoint: async (name, at) => {
          if (crashPoint?.name !== name) return;
          const { listener } = crashPoint;
          crashPoint = undefined;
          safely(() => listener({ name, ...at }));
          // Stop here: the test crashes the worker now. Only a clean close ends the stop (it waits for every
          // running phase, so it would wait forever otherwise).
          await new Promise<never>((_, reject) => stopped.add(reject));
        },
      },
      ctx,
    );
    harness.session.subscribe(({ batch }) => {
      if (batch.tasks.length > 0) scheduleTaskPublication();
    });
    setStatus({ kind: "ready", database, recovered: [...harness.recovered], openMs: performance.now() - started });
    await options.onReady?.(harness);
    ready(harness);
  };

  let publicationScheduled = false;
  const scheduleTaskPublication = () => {
    if (publicationScheduled || taskListeners.size === 0) return;
    publicationScheduled = true;
    // Coalesce a burst of commits into one view; a view never shows anything uncommitted.
    queueMicrotask(async () => {
      publicationScheduled = false;
      if (!harness || harness.closed) return;
      const inspection = await harness.inspect(ctx);
      for (const listener of taskListeners) safely(() => listener(inspection));
    });
  };

  const closeCleanly = async (reason: "close" | "takeover") => {
    closing ??= (async () => {
      try {
        if (!releaseLock) stopWaiting.abort(); // still waiting for the lock: stop waiting, nothing to close
        await opening?.catch(() => {}); // an open in progress finishes first, then is closed
        if (harness) {
          const closed = harness.close(ctx); // first, so a released phase ends without counting as a failure
          for (const release of stopped) release(new HarnessClosed());
          stopped.clear();
          await closed;
        }
        if (storage) await storage.close();
      } finally {
        setStatus({ kind: "closed", reason });
        releaseLock?.();
      }
    })();
    return closing;
  };

  // Another tab that wants the database asks over this channel; the owner closes cleanly and lets go.
  const channel = typeof BroadcastChannel === "function" ? new BroadcastChannel(lockName) : undefined;
  if (channel) {
    channel.onmessage = (event) => {
      // Only the owner acts (a third tab that is waiting too ignores it); an owner still opening closes
      // as soon as its open is done.
      if ((event.data as { type?: string })?.type === "takeover" && releaseLock && !closing) void closeCleanly("takeover");
    };
  }

  const requireHarness = () => {
    if (!harness || status.kind !== "ready") throw new DurableError(`The database is not open (status: ${status.kind}).`);
    return harness;
  };

  const lifeLock = (globalThis.navigator as Navigator | undefined)?.locks ? `pi-durable-web:worker-life:${crypto.randomUUID()}` : undefined;
  // Named to the page only once it is held: a page that asked for it earlier could be granted it first.
  let lifeLockHeld!: (name: string | undefined) => void;
  const lifeLockName = new Promise<string | undefined>((resolve) => (lifeLockHeld = resolve));
  const host: HarnessHost = {
    status: () => status,
    lifeLock: () => lifeLockName,
    onStatus(listener) {
      statusListeners.add(listener);
      safely(() => listener(status));
    },
    onReport(listener) {
      reportListeners.add(listener);
      for (const report of recentReports) safely(() => listener(report));
    },
    watchTasks(listener) {
      taskListeners.add(listener);
      if (harness) void harness.inspect(ctx).then((inspection) => safely(() => listener(inspection)));
    },
    async createTask(kind, input, createOptions = {}) {
      const open = requireHarness();
      const definition = open.registry.task(kind);
      if (!definition) throw new UnknownTaskKind(kind, open.registry.extensions.flatMap((e) => (e.tasks ?? []).map((t) => t.name)));
      const conversation = createOptions.conversationId !== undefined ? open.conversation(createOptions.conversationId) : await open.root(ctx);
      return conversation.commit((tx) => tx.createTask(definition, input), ctx);
    },
    getTask: (id) => requireHarness().getTask(id, ctx),
    waitForTask: (id) => requireHarness().waitForTask(id, ctx),
    abortTask: (id) => requireHarness().abortTask(id, ctx),
    inspect: () => requireHarness().inspect(ctx),
    resume: () => requireHarness().resume(),
    // On the commit line: storage.query() switches the connection to query_only around the statement, and a
    // commit that slipped in between would fail with SQLITE_READONLY.
    query: (sql, params = []) => requireHarness().session.read(() => storage!.query(sql, ...params)),
    async exportDatabase() {
      requireHarness();
      const bytes = await storage!.exportImage();
      return Comlink.transfer(bytes, [bytes.buffer as ArrayBuffer]);
    },
    armCrashPoint(name, listener) {
      crashPoint = { name, listener };
    },
    disarmCrashPoint() {
      crashPoint = undefined;
    },
    close: () => closeCleanly("close"),
    requestTakeover() {
      channel?.postMessage({ type: "takeover" });
    },
    async rootConversation(agent) {
      return (await requireHarness().root(ctx, agent ? { agent } : {})).id;
    },
    async createConversation(agent) {
      return (await requireHarness().createConversation(agent ? { agent } : {}, ctx)).id;
    },
    async listConversations() {
      const open = requireHarness();
      return [...open.session.conversations.keys()].sort((a, b) => a - b).map((id) => {
        const conversation = open.conversation(id);
        return { id, agent: conversation.agent(), busy: conversation.busy };
      });
    },
    configure: (conversationId, change) => requireHarness().conversation(conversationId).configure(change, ctx),
    async submit(conversationId, draft) {
      return (await requireHarness().conversation(conversationId).submit(draft, ctx)).id;
    },
    async waitForSubmission(submissionId) {
      return (await requireHarness().submission(submissionId, ctx)).wait(ctx);
    },
    abortConversation: (conversationId) => requireHarness().conversation(conversationId).abort(ctx),
    compact: (conversationId, instructions) => requireHarness().conversation(conversationId).compact(instructions ? { instructions } : {}, ctx),
    async watchConversation(conversationId, listener) {
      requireHarness().conversation(conversationId).subscribe((view) => safely(() => listener(view)));
    },
    async call(method, args) {
      const open = requireHarness();
      const implementation = options.methods?.[method];
      if (!implementation) throw new DurableError(`The worker has no method ${JSON.stringify(method)}; add it with serveHarness({ methods }).`);
      return implementation(open, ...args);
    },
  };

  // Expose first, synchronously: messages the page sends while the database opens are queued, not lost.
  Comlink.expose(host);
  // Test tools (pi-durable-web/testing) reach the host from the worker's own scope, whatever the page does.
  (globalThis as { __piDurableHost?: HarnessHost }).__piDurableHost = host;

  const locks = (globalThis.navigator as Navigator | undefined)?.locks;
  const stopWaiting = new AbortController();
  // Held for the worker's whole life: the page queues for it and is granted it exactly when the worker dies
  // (terminated, crashed, its page gone), which is how a client tells a dead worker from a busy one.
  if (lifeLock && locks) {
    void locks.request(lifeLock, () => {
      lifeLockHeld(lifeLock);
      return new Promise<never>(() => {});
    });
  } else {
    lifeLockHeld(undefined);
  }
  const withLock = (body: () => Promise<void>) => {
    if (!locks) return body(); // no Web Locks (old browser, Node): single owner is the app's responsibility
    return new Promise<void>((resolve, reject) => {
      const hold = () =>
        new Promise<void>((release) => {
          releaseLock = release;
          body().then(resolve, (error) => {
            release();
            reject(error);
          });
        });
      void locks
        .request(lockName, { ifAvailable: true }, async (lock) => {
          if (lock) return hold();
          setStatus({ kind: "waiting-for-lock", database });
          locks.request(lockName, { signal: stopWaiting.signal }, hold).catch((error) => {
            if (stopWaiting.signal.aborted) resolve(); // closed while waiting: no open happened
            else reject(error);
          });
        })
        .catch(reject);
    });
  };

  opening = withLock(open);
  opening.catch((error) => {
    setStatus({ kind: "failed", error: errorShape(error) });
    failed(error);
  });

  return { ready: readyPromise };
}

function safely(call: () => void): void {
  try {
    const result = call() as unknown;
    if (result && typeof (result as Promise<unknown>).catch === "function") (result as Promise<unknown>).catch(() => {});
  } catch {
    // a listener on a page that went away
  }
}

function errorShape(error: unknown): ErrorShape {
  if (error instanceof Error) return { name: error.name, message: error.message };
  return { name: "Error", message: String(error) };
}
