import { LIVE, scopeOf } from "../agent/documents.ts";
import type { AnyTool } from "../agent/tool.ts";
import { BACKGROUND_CONTEXT } from "../context.ts";
import { CrashSweepViolation } from "../errors.ts";
import type { Harness } from "../harness.ts";
import { MemoryStorage } from "../storage/memory.ts";
import type { Batch, EntryRecord, SubmissionRecord, TaskRecord } from "../storage/records.ts";
import type { Storage } from "../storage/storage.ts";
import { createManualClock, type ManualClock } from "./clock.ts";

/**
 * crashSweep: every commit boundary of a scenario is a crash point. The scenario runs once to count its
 * commits; then, for every commit k, a fresh world runs it again and crashes at that boundary — the storage
 * image is copied at that instant, the old harness is abandoned (its storage never answers again, its clock
 * never moves), a new harness opens on a copy of the image — and runs to the end; the invariants are checked
 * on what is left. Each boundary is crashed on both sides: right after commit k is stored (nothing after it
 * ran) and right before commit k+1 would be stored (everything up to it ran: the effects in between happened,
 * their commit did not). With `double`, the reopened process crashes again at one of its own boundaries (a
 * crash during recovery) before a third one finishes. Framework-free: it throws a `CrashSweepViolation` for the first
 * world that breaks an invariant, with the crash points and the commit log; otherwise it returns counts.
 */
export interface CrashScenario<W = unknown> {
  /** Shows in messages. */
  name?: string;
  /** State that survives crashes, like files on disk (fresh for every world): effects, tool runs, files. */
  world?: () => W;
  /**
   * Opens a harness on `storage` with `clock` (pass it as `HarnessOptions.clock`). Called at the start of
   * every process: the first one and each one after a crash.
   */
  open(storage: Storage, clock: ManualClock, world: SweepWorld<W>): Promise<Harness>;
  /**
   * The app's start-up, run in every process after `open` (like a page's code after a reload): it must be
   * idempotent — make sure the work exists (look before you create, reuse a `requestId`) and start it.
   */
  start(harness: Harness, world: SweepWorld<W>): Promise<void>;
  /** True when the scenario is finished. Default: no live task and no open submission. */
  done?(harness: Harness, world: SweepWorld<W>): boolean | Promise<boolean>;
  /** Checks of your own, run after the built-in ones; return (or throw) a message to report a violation. */
  invariants?: Array<(view: CrashWorldView<W>) => string | undefined | void | Promise<string | undefined | void>>;
}

export interface CrashSweepOptions {
  /** `"memory"` (MemoryStorage, default), `"sqlite"` (sqlite-wasm in memory), or your own backend. */
  storage?: "memory" | "sqlite" | SweepBackend;
  /**
   * Also crash a second time, after the j-th commit of the recovering process. `true` runs every pair;
   * `{ sample, seed }` runs at most `sample` pairs drawn with the seed (every single crash still runs).
   */
  double?: boolean | { sample: number; seed?: number };
  /** Run only a sample of the single crash points (every one by default), drawn with the seed. */
  single?: { sample: number; seed?: number };
  /** Skip built-in invariants by name (see `BUILT_IN_INVARIANTS`). */
  skip?: readonly BuiltInInvariant[];
  /** Clock start of the first process. Default 1000. */
  startAt?: number;
  /** Scheduling rounds (clock steps) a process may take before the world counts as livelocked. Default 5000. */
  maxSteps?: number;
}

export interface SweepBackend {
  create(): Promise<Storage>;
  fromImage(image: Uint8Array): Promise<Storage>;
}

export const BUILT_IN_INVARIANTS = [
  "committed-rows-survive",
  "settled-never-change",
  "no-task-left-live",
  "effects-at-most-once",
  "one-result-per-tool-call",
  "unsafe-tool-never-twice",
  "no-resend-before-backoff",
] as const;
export type BuiltInInvariant = (typeof BUILT_IN_INVARIANTS)[number];

/** What scenario code gets: the user's world plus the recorders the built-in invariants read. */
export interface SweepWorld<W = unknown> {
  readonly state: W;
  /** The process this code runs in: 1 for the first, 2 after the first crash, … */
  readonly process: number;
  /** Records an effect that must happen at most once in the whole world (a memo-guarded side effect). */
  once(key: string): void;
  /** Records something that may repeat (a log line); kept in order for your invariants. */
  log(line: string): void;
  /**
   * Wraps a tool so its runs are counted per call: an `"unsafe"` tool must never run twice for one call
   * (built-in invariant), a `"safe"` one may.
   */
  track<T extends AnyTool>(tool: T): T;
}

/** What invariants see at the end of a crash world. */
export interface CrashWorldView<W = unknown> {
  /** Where the world crashed: one point, or two (the second counted in the second process). */
  crashes: readonly CrashPoint[];
  state: W;
  /** The storage at the end (after the last process finished). */
  storage: Storage;
  /** The storage image right after each crash (a read-only copy). */
  atCrash: readonly Storage[];
  effects: ReadonlyMap<string, number>;
  lines: readonly string[];
  /** Tool runs per `name:callId`, with the tool's replay policy. */
  toolRuns: ReadonlyMap<string, { replay: "safe" | "unsafe"; runs: number }>;
  /** Every commit of the world in order, one line each. */
  log: readonly string[];
}

/** A crash right after commit `commit` was stored, or right before it would have been (`edge: "before"`). */
export interface CrashPoint {
  commit: number;
  edge: "after" | "before";
}

export function describeCrash(point: CrashPoint): string {
  return point.edge === "after" ? `right after commit ${point.commit}` : `right before commit ${point.commit}`;
}

export interface CrashSweepResult {
  /** Commits of the scenario without a crash. */
  commits: number;
  /** Crash worlds run: single crashes plus double ones. */
  worlds: number;
  single: number;
  double: number;
}

/** Runs `scenario` once per crash point (see `CrashScenario`). Resolves with counts; throws `CrashSweepViolation`. */
export async function crashSweep<W>(scenario: CrashScenario<W>, options: CrashSweepOptions = {}): Promise<CrashSweepResult> {
  const backend = await backendOf(options.storage ?? "memory");
  const baseline = await runWorld(scenario, backend, options, []);
  if (baseline.violation) throw baseline.violation;
  const commits = baseline.commitsPerProcess[0]!;
  let single = 0;
  const pairs: CrashPoint[][] = [];
  let points = crashPoints(commits);
  if (options.single && points.length > options.single.sample) points = sample(points, options.single.sample, options.single.seed ?? 1);
  for (const point of points) {
    const result = await runWorld(scenario, backend, options, [point]);
    single++;
    if (result.violation) throw result.violation;
    if (options.double) for (const second of crashPoints(result.commitsPerProcess[1] ?? 0)) pairs.push([point, second]);
  }
  let chosen = pairs;
  if (typeof options.double === "object" && pairs.length > options.double.sample) {
    chosen = sample(pairs, options.double.sample, options.double.seed ?? 1);
  }
  for (const pair of chosen) {
    const result = await runWorld(scenario, backend, options, pair);
    if (result.violation) throw result.violation;
  }
  return { commits, worlds: single + chosen.length, single, double: chosen.length };
}

/** Both sides of every boundary of a run with `commits` commits. */
function crashPoints(commits: number): CrashPoint[] {
  const points: CrashPoint[] = [];
  for (let commit = 1; commit <= commits; commit++) {
    if (commit > 1) points.push({ commit, edge: "before" });
    points.push({ commit, edge: "after" });
  }
  return points;
}

/** `count` items of `list` drawn without replacement by a seeded generator (mulberry32), in list order. */
function sample<T>(list: readonly T[], count: number, seed: number): T[] {
  let state = seed >>> 0;
  const random = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const indexes = list.map((_, index) => index);
  for (let i = 0; i < count; i++) {
    const j = i + Math.floor(random() * (indexes.length - i));
    [indexes[i], indexes[j]] = [indexes[j]!, indexes[i]!];
  }
  return indexes
    .slice(0, count)
    .sort((a, b) => a - b)
    .map((index) => list[index]!);
}

// ---------------------------------------------------------------------------------------------------------

interface WorldResult {
  commitsPerProcess: number[];
  violation?: CrashSweepViolation;
}

async function backendOf(storage: CrashSweepOptions["storage"]): Promise<SweepBackend> {
  if (storage === undefined || storage === "memory") {
    return { create: async () => new MemoryStorage(), fromImage: async (image) => MemoryStorage.fromImage(image) };
  }
  if (storage === "sqlite") {
    const { openSqliteStorage } = await import("../storage/sqlite/open-storage.ts");
    return { create: () => openSqliteStorage({ vfs: "memory" }), fromImage: (image) => openSqliteStorage({ vfs: "memory", image }) };
  }
  return storage;
}

class Recorder<W> {
  readonly effects = new Map<string, number>();
  readonly lines: string[] = [];
  readonly toolRuns = new Map<string, { replay: "safe" | "unsafe"; runs: number }>();
  readonly log: string[] = [];
  readonly requests: RequestEvent[] = [];
  process = 1;
  readonly state: W;

  constructor(state: W) {
    this.state = state;
  }

  view(): SweepWorld<W> {
    const recorder = this;
    const process = this.process;
    return {
      state: this.state,
      process,
      once: (key) => void this.effects.set(key, (this.effects.get(key) ?? 0) + 1),
      log: (line) => void this.lines.push(line),
      track<T extends AnyTool>(tool: T): T {
        return Object.freeze({
          ...tool,
          execute(args: unknown, api: { callId: string }, context: unknown) {
            const key = `${tool.name}:${api.callId}`;
            const runs = recorder.toolRuns.get(key) ?? { replay: tool.replay ?? "unsafe", runs: 0 };
            runs.runs++;
            recorder.toolRuns.set(key, runs);
            return (tool.execute as (...a: unknown[]) => unknown)(args, api, context);
          },
        }) as T;
      },
    };
  }
}

/**
 * A storage that counts commits and, at `crash`, copies the image and freezes: from then on no call answers
 * (the process is gone; the copy is what the disk holds). `after`: the commit is stored, its caller never hears
 * of it. `before`: the commit is not stored.
 */
function crashingStorage(
  inner: Storage,
  crash: CrashPoint | undefined,
  onCommit: (what: string, batch?: Batch) => void,
  onCrash: (image: Uint8Array) => void,
): Storage & { readonly busy: number; disarm(): void } {
  let commits = 0;
  let frozen = false;
  /** Storage calls started and not yet answered (frozen ones excluded): the process is not idle. */
  let busy = 0;
  const never = new Promise<never>(() => {});
  const tracked = async <T>(body: () => Promise<T>): Promise<T> => {
    busy++;
    try {
      return await body();
    } finally {
      busy--;
    }
  };
  const freeze = async (): Promise<never> => {
    frozen = true;
    onCrash(await tracked(() => inner.exportImage()));
    return never;
  };
  const commit = async <T>(what: () => string, body: () => Promise<T>, batch?: Batch): Promise<T> => {
    if (frozen) return never;
    if (crash?.edge === "before" && commits + 1 === crash.commit) return freeze();
    const result = await tracked(body);
    commits++;
    onCommit(what(), batch);
    if (crash?.edge === "after" && commits === crash.commit) return freeze();
    return result;
  };
  const read =
    <A extends unknown[], T>(method: (...args: A) => Promise<T>) =>
    (...args: A): Promise<T> =>
      frozen ? never : tracked(() => method.apply(inner, args));
  return {
    get busy() {
      return busy;
    },
    /** No crash from here on (the process finished first; its close is bookkeeping, not a crash point). */
    disarm() {
      crash = undefined;
    },
    get readOnly() {
      return inner.readOnly;
    },
    get label() {
      return inner.label;
    },
    load: read(inner.load),
    apply: (batch) =>
      commit(
        () => describeBatch(batch),
        () => inner.apply(batch),
        batch,
      ),
    getTask: read(inner.getTask),
    listTasks: read(inner.listTasks),
    getConversation: read(inner.getConversation),
    listConversations: read(inner.listConversations),
    listEntries: read(inner.listEntries),
    getEntry: read(inner.getEntry),
    getDocument: read(inner.getDocument),
    listDocuments: read(inner.listDocuments),
    getSubmission: read(inner.getSubmission),
    findSubmission: read(inner.findSubmission),
    listSubmissions: read(inner.listSubmissions),
    query: read(inner.query),
    exportImage: read(inner.exportImage),
    close: read(inner.close),
  };
}

function describeBatch(batch: Batch): string {
  const parts: string[] = [];
  for (const task of batch.tasks) {
    const state = task.state as { status: string; checkpoint?: { phase?: string }; outcome?: { status: string } };
    const where = state.checkpoint?.phase ?? state.outcome?.status ?? "";
    parts.push(
      `task ${task.id} ${task.kind} ${state.status}${where ? ` ${where}` : ""}${task.abortRequested ? " (abort mark)" : ""}${task.memos ? ` memos ${Object.keys(task.memos).join(",")}` : ""}`,
    );
  }
  for (const entry of batch.entries) parts.push(`entry ${entry.id} ${entry.kind}`);
  for (const submission of batch.submissions) parts.push(`submission ${submission.id} ${submission.status}`);
  for (const document of batch.documents) parts.push(`document ${document.key}${document.value === null ? " deleted" : ""}`);
  for (const conversation of batch.conversations) parts.push(`conversation ${conversation.id}`);
  return parts.join("; ") || "(empty)";
}

const macrotask: () => Promise<void> =
  typeof (globalThis as { setImmediate?: unknown }).setImmediate === "function"
    ? () => new Promise((resolve) => (globalThis as unknown as { setImmediate: (f: () => void) => void }).setImmediate(resolve))
    : () => new Promise((resolve) => setTimeout(resolve, 0));

/**
 * Lets queued work run until no storage call is in flight and `progress()` has not changed for `rounds`
 * macrotasks (SQLite yields to the event loop under load, so idleness is judged by storage, not by time).
 */
async function quiesce(progress: () => number, busy: () => number, rounds = 3): Promise<void> {
  let last = progress();
  let still = 0;
  for (let round = 0; round < 10_000 && still < rounds; round++) {
    await macrotask();
    const now = progress();
    still = now === last && busy() === 0 ? still + 1 : 0;
    last = now;
  }
}

async function runWorld<W>(
  scenario: CrashScenario<W>,
  backend: SweepBackend,
  options: CrashSweepOptions,
  crashes: CrashPoint[],
): Promise<WorldResult> {
  const recorder = new Recorder<W>(scenario.world ? scenario.world() : (undefined as W));
  const commitsPerProcess: number[] = [];
  const atCrash: Storage[] = [];
  let storage = await backend.create();
  let now = options.startAt ?? 1_000;
  const maxSteps = options.maxSteps ?? 5_000;
  const name = scenario.name ?? "scenario";
  const fail = (invariant: string, detail: string): WorldResult => ({
    commitsPerProcess,
    violation: new CrashSweepViolation(name, crashes, invariant, detail, recorder.log),
  });
  for (let process = 1; ; process++) {
    recorder.process = process;
    const crashAt = crashes[process - 1];
    const clock = createManualClock(now);
    let image: Uint8Array | undefined;
    let commits = 0;
    let error: unknown;
    const store = crashingStorage(
      storage,
      crashAt,
      (what, batch) => {
        commits++;
        recorder.log.push(`p${process}#${commits}: ${what}`);
        if (batch) recorder.requests.push(...requestEvents(batch, process));
      },
      (bytes) => (image = bytes),
    );
    const world = recorder.view();
    let harness: Harness | undefined;
    let started = false;
    const boot = (async () => {
      harness = await scenario.open(store, clock, world);
      await scenario.start(harness, world);
      started = true;
    })().catch((e: unknown) => (error = e));
    let finished = false;
    for (let step = 0; ; step++) {
      await quiesce(
        () => commits + clock.pending * 1e6 + (started ? 1e12 : 0),
        () => store.busy,
      );
      if (error !== undefined) return fail("the scenario ran", `process ${process} threw: ${String((error as Error)?.stack ?? error)}`);
      if (image) break;
      if (started && harness && (await isDone(scenario, harness, world))) {
        finished = true;
        break;
      }
      if (step >= maxSteps) return fail("progress", `process ${process} did not finish within ${maxSteps} scheduling rounds (a livelock?)`);
      if (!clock.next()) {
        await quiesce(
          () => commits + (started ? 1e12 : 0),
          () => store.busy,
          50,
        ); // be sure before calling it a stall
        if (image) break;
        if (started && harness && (await isDone(scenario, harness, world))) {
          finished = true;
          break;
        }
        return fail("progress", `process ${process} stalled: work is left but no timer is armed and nothing runs`);
      }
    }
    void boot;
    commitsPerProcess.push(commits);
    now = clock.now();
    if (finished) {
      // (A process that finished before its crash point ran shorter than the baseline: that world has no crash.)
      // Its close commits too; a crash point beyond the finish would freeze that commit and the close with it
      // (the number of commits before the finish varies with how SQLite's calls interleave).
      store.disarm();
      if (harness) await harness.close(BACKGROUND_CONTEXT).catch(() => {});
      break;
    }
    // The crash: the old harness is abandoned (its storage never answers again, its clock never moves).
    atCrash.push(await backend.fromImage(image!));
    recorder.log.push(`-- crash ${describeCrash(crashAt!)} of process ${process} --`);
    storage = await backend.fromImage(image!);
  }
  const view: CrashWorldView<W> & { [REQUESTS]: RequestEvent[] } = {
    [REQUESTS]: recorder.requests,
    crashes,
    state: recorder.state,
    storage,
    atCrash,
    effects: recorder.effects,
    lines: recorder.lines,
    toolRuns: recorder.toolRuns,
    log: recorder.log,
  };
  for (const [invariant, check] of builtIns) {
    if (options.skip?.includes(invariant)) continue;
    const problem = await check(view);
    if (problem) return fail(invariant, problem);
  }
  for (const [index, check] of (scenario.invariants ?? []).entries()) {
    let problem: string | undefined | void;
    try {
      problem = await check(view);
    } catch (error) {
      problem = String((error as Error)?.message ?? error);
    }
    if (problem) return fail(`invariant ${index + 1} of the scenario`, problem);
  }
  return { commitsPerProcess };
}

async function isDone<W>(scenario: CrashScenario<W>, harness: Harness, world: SweepWorld<W>): Promise<boolean> {
  if (scenario.done) return scenario.done(harness, world);
  return harness.session.live.size === 0 && harness.session.openSubmissions.size === 0;
}

// ---------------------------------------------------------------------------------------------------------
// Built-in invariants

interface Rows {
  tasks: TaskRecord[];
  entries: EntryRecord[];
  submissions: SubmissionRecord[];
  conversations: number[];
}

async function rowsOf(storage: Storage): Promise<Rows> {
  const conversations = (await storage.listConversations()).map((c) => c.id);
  const entries: EntryRecord[] = [];
  const submissions: SubmissionRecord[] = [];
  for (const id of conversations) {
    entries.push(...(await storage.listEntries(id)));
    submissions.push(...(await storage.listSubmissions(id)));
  }
  return { tasks: await storage.listTasks(), entries, submissions, conversations };
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
const settled = (s: SubmissionRecord) => s.status === "done" || s.status === "unanswered";

const builtIns: Array<[BuiltInInvariant, (view: CrashWorldView<unknown>) => Promise<string | undefined>]> = [
  [
    "committed-rows-survive",
    async (view) => {
      const end = await rowsOf(view.storage);
      for (const image of view.atCrash) {
        const before = await rowsOf(image);
        const tasks = new Set(end.tasks.map((t) => t.id));
        for (const task of before.tasks)
          if (!tasks.has(task.id)) return `task ${task.id} (${task.kind}) was committed before the crash and is gone`;
        const entries = new Map(end.entries.map((e) => [e.id, e]));
        for (const entry of before.entries) {
          if (!same(entries.get(entry.id), entry)) return `entry ${entry.id} (${entry.kind}) changed or vanished after the crash`;
        }
        const submissions = new Set(end.submissions.map((s) => s.id));
        for (const submission of before.submissions) if (!submissions.has(submission.id)) return `submission ${submission.id} is gone`;
        const conversations = new Set(end.conversations);
        for (const id of before.conversations) if (!conversations.has(id)) return `conversation ${id} is gone`;
      }
      return undefined;
    },
  ],
  [
    "settled-never-change",
    async (view) => {
      const end = await rowsOf(view.storage);
      const tasks = new Map(end.tasks.map((t) => [t.id, t]));
      const submissions = new Map(end.submissions.map((s) => [s.id, s]));
      for (const image of view.atCrash) {
        const before = await rowsOf(image);
        for (const task of before.tasks) {
          if (task.state.status === "terminal" && !same(tasks.get(task.id), task))
            return `terminal task ${task.id} (${task.kind}) changed after the crash`;
        }
        for (const submission of before.submissions) {
          if (settled(submission) && !same(submissions.get(submission.id), submission))
            return `settled submission ${submission.id} changed after the crash`;
        }
      }
      return undefined;
    },
  ],
  [
    "no-task-left-live",
    async (view) => {
      const live = (await view.storage.listTasks()).filter((t) => t.state.status !== "terminal");
      return live.length === 0
        ? undefined
        : `tasks left live at the end: ${live.map((t) => `${t.id} (${t.kind}, ${t.state.status})`).join(", ")}`;
    },
  ],
  [
    "effects-at-most-once",
    async (view) => {
      for (const [key, count] of view.effects) if (count > 1) return `effect ${JSON.stringify(key)} happened ${count} times`;
      return undefined;
    },
  ],
  [
    "one-result-per-tool-call",
    async (view) => {
      const { entries } = await rowsOf(view.storage);
      const results = new Map<string, number>();
      for (const entry of entries) {
        if (entry.kind !== "pi.tool-result") continue;
        const id = (entry.payload as { message?: { toolCallId?: string } }).message?.toolCallId;
        results.set(`${entry.conversationId}:${id}`, (results.get(`${entry.conversationId}:${id}`) ?? 0) + 1);
      }
      for (const entry of entries) {
        if (entry.kind !== "pi.assistant") continue;
        const message = (entry.payload as { message?: { content?: Array<{ type: string; id?: string }>; stopReason?: string } }).message;
        if (message?.stopReason === "aborted" || message?.stopReason === "error") continue;
        for (const item of message?.content ?? []) {
          if (item.type !== "toolCall") continue;
          const count = results.get(`${entry.conversationId}:${item.id}`) ?? 0;
          if (count !== 1) return `tool call ${item.id} of entry ${entry.id} has ${count} results`;
        }
      }
      return undefined;
    },
  ],
  [
    "unsafe-tool-never-twice",
    async (view) => {
      for (const [key, { replay, runs }] of view.toolRuns)
        if (replay === "unsafe" && runs > 1) return `unsafe tool call ${key} ran ${runs} times`;
      return undefined;
    },
  ],
  [
    "no-resend-before-backoff",
    async (view) => {
      // A request in flight at a crash (its `requestedAt` committed) goes out again only as a later attempt,
      // after a committed retry time, and not before that time.
      const events = (view as CrashWorldView<unknown> & { [REQUESTS]: RequestEvent[] })[REQUESTS];
      for (const [index, image] of view.atCrash.entries()) {
        for (const conversation of await image.listConversations()) {
          const live = (await image.getDocument(scopeOf(conversation.id), LIVE)) as LiveDoc;
          const inFlight = live?.generation;
          if (inFlight?.requestedAt === undefined) continue;
          let retryAt: number | undefined;
          for (const event of events) {
            if (event.process <= index + 1 || event.conversationId !== conversation.id) continue;
            if (event.retryAt !== undefined) retryAt = event.retryAt;
            if (event.requestedAt === undefined) continue;
            if (retryAt === undefined || event.requestedAt < retryAt || event.attempt <= (inFlight.attempt ?? 1)) {
              return `the request of conversation ${conversation.id} in flight at crash ${index + 1} (attempt ${inFlight.attempt}) was sent again as attempt ${event.attempt} at ${event.requestedAt}, ${retryAt === undefined ? "without a retry backoff" : `before its backoff ended at ${retryAt}`}`;
            }
            break;
          }
        }
      }
      return undefined;
    },
  ],
];

type LiveDoc = { generation?: { attempt?: number; requestedAt?: number; retry?: { at: number } } } | undefined;

const REQUESTS = Symbol("requests");

/** A model request (or a retry time) committed to a conversation's `pi.live`. */
interface RequestEvent {
  process: number;
  conversationId: number;
  attempt: number;
  requestedAt?: number;
  retryAt?: number;
}

function requestEvents(batch: Batch, process: number): RequestEvent[] {
  const out: RequestEvent[] = [];
  for (const document of batch.documents) {
    if (document.key !== LIVE || !document.scope.startsWith("conversation:")) continue;
    const generation = (document.value as LiveDoc)?.generation;
    if (!generation || (generation.requestedAt === undefined && generation.retry === undefined)) continue;
    out.push({
      process,
      conversationId: Number(document.scope.slice("conversation:".length)),
      attempt: generation.attempt ?? 1,
      ...(generation.requestedAt !== undefined ? { requestedAt: generation.requestedAt } : {}),
      ...(generation.retry ? { retryAt: generation.retry.at } : {}),
    });
  }
  return out;
}
