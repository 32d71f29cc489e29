/**
 * browserCrashSweep: the crash sweep in a real browser, over the app's own scenario. The scenario runs once
 * in a fresh context to count the commits it makes (the worker's commit watch, src/browser/commit-watch.ts);
 * then, for every commit k, a fresh context runs it again, the worker freezes its storage right after commit
 * k is stored (or right before it would be), the tab is crashed for real (a reload, the worker terminated, or
 * the renderer killed through CDP), and the next load recovers and finishes. Built-in invariants and the
 * scenario's own are checked on what is left; the first violating world throws a `CrashSweepViolation` with
 * the commits before the crash and after it. Needs a worker that serves crash points (the default).
 */
import type { Browser, BrowserContextOptions, ConsoleMessage, Page, Worker as PlaywrightWorker } from "playwright-core";
import type { CommitCrash, CommitSummary, CommitWatch } from "../browser/commit-watch.ts";
import { CrashSweepViolation } from "../errors.ts";
import { sample } from "./crash-sweep.ts";
import { type CrashKind, crashTab, harnessWorker, queryThroughPage, waitForReady } from "./playwright.ts";

export interface BrowserCrashScenario {
  /** Shows in messages. */
  name?: string;
  /** The page to open (relative to the context's baseURL). Default "/". */
  url?: string;
  /**
   * What the user does on the ready page to start the work (click Start, send a message). Keep it to the
   * actions: a crash may come while it runs. `done` says when the work is over.
   */
  run(page: Page): Promise<void>;
  /** What the user does on the recovered page after the crash, if anything (the work resumes by itself). */
  resume?(page: Page): Promise<void>;
  /** True when the scenario is finished. Default: no live task, no open submission, and no commit for a while. */
  done?(page: Page): Promise<boolean>;
  /**
   * Console lines (the page's and the worker's) that are side effects, each to happen at most once in a world:
   * the first group of the match (or the whole line) names the effect. Default `/^effect: (.+)$/`.
   */
  effects?: RegExp;
  /** Checks of your own on each world's end; return (or throw) a message to report a violation. */
  invariants?: Array<(world: BrowserCrashWorld) => string | undefined | void | Promise<string | undefined | void>>;
}

/** What the invariants see at the end of a world. */
export interface BrowserCrashWorld {
  /** The recovered page, finished. */
  page: Page;
  /** Where the world crashed (its commit counted from the scenario's start). */
  crash: CommitCrash;
  /** The commits before the crash, and the recovering process's own. */
  before: readonly CommitSummary[];
  after: readonly CommitSummary[];
  /** Side effects seen (the `effects` pattern), with how often. */
  effects: ReadonlyMap<string, number>;
  /** Read-only SQL on the recovered database. */
  query(sql: string): Promise<Array<Record<string, unknown>>>;
}

export const BROWSER_INVARIANTS = [
  "no-task-lost",
  "settled-never-change",
  "no-task-left-live",
  "effects-at-most-once",
  "applied-once",
  "unsafe-tool-never-rerun",
  "no-resend-before-backoff",
] as const;
export type BrowserInvariant = (typeof BROWSER_INVARIANTS)[number];

export interface BrowserCrashSweepOptions {
  /** How the tab dies at each commit: `reload` (default), `terminate-worker` (then a reload), `renderer` (Chromium). */
  crash?: CrashKind;
  /** Which side of each boundary: both (default), or only `after` / `before` a commit. */
  edges?: "both" | "after" | "before";
  /** Only a sample of the worlds, drawn with the seed (the same for every shard). */
  sample?: { count: number; seed?: number };
  /** This call runs only the worlds `index`, `index + count`, … (the other shards run the rest). */
  shard?: { index: number; count: number };
  /** For each world's new context, e.g. `{ baseURL }`. */
  context?: BrowserContextOptions;
  /** Skip built-in invariants by name. */
  skip?: readonly BrowserInvariant[];
  /** How long one world may take to be ready, to finish, or to reach its crash. Default 60 s. */
  timeoutMs?: number;
}

export interface BrowserCrashSweepResult {
  /** Commits the scenario made without a crash. */
  commits: number;
  /** Crash worlds this call ran. */
  worlds: number;
}

type Hooked = { __piDurableCommits?: CommitWatch };

/** Runs the sweep; throws a `CrashSweepViolation` for the first world (in commit order) that breaks an invariant. */
export async function browserCrashSweep(
  browser: Browser,
  scenario: BrowserCrashScenario,
  options: BrowserCrashSweepOptions = {},
): Promise<BrowserCrashSweepResult> {
  const counted = await runWorld(browser, scenario, options, undefined);
  const commits = counted.before.length;
  let worlds = crashPoints(commits, options.edges ?? "both");
  if (options.sample && worlds.length > options.sample.count) worlds = sample(worlds, options.sample.count, options.sample.seed ?? 1);
  const shard = options.shard ?? { index: 0, count: 1 };
  const mine = worlds.filter((_, position) => position % shard.count === shard.index);
  for (const crash of mine) await runWorld(browser, scenario, options, crash);
  return { commits, worlds: mine.length };
}

function crashPoints(commits: number, edges: "both" | "after" | "before"): CommitCrash[] {
  const points: CommitCrash[] = [];
  for (let commit = 1; commit <= commits; commit++) {
    if (edges !== "after") points.push({ commit, edge: "before" });
    if (edges !== "before") points.push({ commit, edge: "after" });
  }
  return points;
}

interface WorldEnd {
  before: CommitSummary[];
  after: CommitSummary[];
}

async function runWorld(
  browser: Browser,
  scenario: BrowserCrashScenario,
  options: BrowserCrashSweepOptions,
  crash: CommitCrash | undefined,
): Promise<WorldEnd> {
  const name = scenario.name ?? "scenario";
  const timeoutMs = options.timeoutMs ?? 60_000;
  const context = await browser.newContext(options.context);
  const effects = new Map<string, number>();
  const pattern = scenario.effects ?? /^effect: (.+)$/;
  const record = (message: ConsoleMessage) => {
    const match = pattern.exec(message.text());
    if (match) effects.set(match[1] ?? match[0], (effects.get(match[1] ?? match[0]) ?? 0) + 1);
  };
  // The context's console has the pages' lines and their workers' (message.worker()).
  context.on("console", record);
  try {
    let page = await context.newPage();
    await page.goto(scenario.url ?? "/");
    await waitForReady(page, timeoutMs);
    const first = await harnessWorker(page);
    const base = (await commitLog(first, 0)).count;
    const hit = crash
      ? first.evaluate((at) => (globalThis as Hooked).__piDurableCommits!.arm(at), { commit: base + crash.commit, edge: crash.edge })
      : undefined;
    hit?.catch(() => {});
    const running = scenario.run(page);
    running.catch(() => {}); // a crash may cut it off; what it did is in the database
    if (!hit) {
      await running;
      await finished(page, scenario, timeoutMs, base).catch((error: Error) => {
        throw new Error(`The run without a crash (counting the commits): ${error.message}`);
      });
      return { before: (await commitLog(first, base + 1)).log, after: [] };
    }
    const reached = await Promise.race([
      hit.then(() => true),
      running
        .then(() => finished(page, scenario, timeoutMs, base))
        .then(
          () => false,
          (error: Error) => {
            throw new Error(`Before the crash ${crash!.edge} commit ${crash!.commit}: ${error.message}`);
          },
        ),
    ]);
    if (!reached) {
      const made = (await commitLog(first, 0)).count - base;
      throw new CrashSweepViolation(name, [crash!], "determinism", `this run made ${made} commits, fewer than the count run`, []);
    }
    const before = (await commitLog(first, base + 1)).log.filter(
      (commit) => commit.commit <= base + crash!.commit - (crash!.edge === "before" ? 1 : 0),
    );
    page = await crashTab(page, options.crash ?? "reload");
    if (options.crash === "terminate-worker") await page.reload();
    const renumbered = before.map((commit) => ({ ...commit, commit: commit.commit - base }));
    try {
      await waitForReady(page, timeoutMs);
      await scenario.resume?.(page);
      // The recovering process may have nothing left to commit: any count will do.
      await finished(page, scenario, timeoutMs, -1);
    } catch (error) {
      const after = (await commitLog(await harnessWorker(page), 1).catch(() => ({ log: [] }))).log;
      const live = await queryThroughPage(
        page,
        "SELECT id, kind, status, record ->> '$.state.until' AS until FROM tasks WHERE status <> 'terminal'",
      );
      const left =
        live && "rows" in live
          ? live.rows.map((row) => `${row.id} ${row.kind} ${row.status}${row.until ? ` until ${row.until}` : ""}`)
          : [];
      const detail = `${error instanceof Error ? error.message : String(error)}${left.length ? ` (live: ${left.join(", ")})` : ""}`;
      throw violation(name, { crash: crash!, before: renumbered, after }, "recovers-and-finishes", detail);
    }
    const after = (await commitLog(await harnessWorker(page), 1)).log;
    const world: BrowserCrashWorld = {
      page,
      crash: crash!,
      before: renumbered,
      after,
      effects,
      query: async (sql) => {
        const answer = await queryThroughPage(page, sql);
        if (!answer) throw new Error("The recovered page has no ready client to query.");
        if ("failed" in answer) throw new Error(answer.failed.message);
        return answer.rows;
      },
    };
    const skip = new Set(options.skip ?? []);
    for (const [invariant, check] of BUILT_IN) {
      if (skip.has(invariant)) continue;
      const detail = await check(world);
      if (detail) throw violation(name, world, invariant, detail);
    }
    for (const [index, check] of (scenario.invariants ?? []).entries()) {
      let detail: string | undefined | void;
      try {
        detail = await check(world);
      } catch (error) {
        detail = error instanceof Error ? error.message : String(error);
      }
      if (detail) throw violation(name, world, `invariant ${index + 1}`, detail);
    }
    return { before: renumbered, after };
  } finally {
    await context.close().catch(() => {});
  }
}

function violation(
  name: string,
  world: Pick<BrowserCrashWorld, "crash" | "before" | "after">,
  invariant: string,
  detail: string,
): CrashSweepViolation {
  const log = [
    ...world.before.map((commit) => `${commit.commit}: ${commit.line}`),
    `— crash (${world.crash.edge} commit ${world.crash.commit}), then the next load —`,
    ...world.after.map((commit) => `r${commit.commit}: ${commit.line}`),
  ];
  return new CrashSweepViolation(name, [world.crash], invariant, detail, log);
}

/** The worker's commit log from commit `from` on (`from` 0: only how many there are, as `count`). */
async function commitLog(worker: PlaywrightWorker, from: number): Promise<{ count: number; log: CommitSummary[] }> {
  // Commit summaries are plain JSON: they cross as structured clones.
  return (await worker.evaluate((start) => {
    const hook = (globalThis as Hooked).__piDurableCommits;
    if (!hook) throw new Error("This worker has no commit watch: serveHarness({ crashPoints: false }) turns it off.");
    return { count: hook.count(), log: start > 0 ? hook.log(start) : [] } as unknown;
  }, from)) as { count: number; log: CommitSummary[] };
}

/** Waits for the scenario's `done`, or by default for no live task, no open submission and no new commit. */
async function finished(page: Page, scenario: BrowserCrashScenario, timeoutMs: number, base: number): Promise<void> {
  let last = -1;
  for (let waited = 0; waited <= timeoutMs; waited += 250) {
    if (scenario.done) {
      if (await scenario.done(page).catch(() => false)) return;
    } else {
      const answer = await queryThroughPage(
        page,
        "SELECT (SELECT count(*) FROM tasks WHERE status <> 'terminal') AS live, (SELECT count(*) FROM submissions WHERE status IN ('queued', 'running')) AS open",
      );
      const row = answer && "rows" in answer ? answer.rows[0] : undefined;
      const count = await harnessWorker(page)
        .then(async (worker) => (await commitLog(worker, 0)).count)
        .catch(() => -1);
      if (row && row.live === 0 && row.open === 0 && count > base && count === last) return;
      last = count;
    }
    await page.waitForTimeout(250);
  }
  throw new Error(`The scenario did not finish within ${timeoutMs} ms.`);
}

type Check = (world: BrowserCrashWorld) => Promise<string | undefined>;

/** The last committed state of each task in `commits`. */
function lastStates(commits: readonly CommitSummary[]): Map<number, CommitSummary["tasks"][number]> {
  const states = new Map<number, CommitSummary["tasks"][number]>();
  for (const commit of commits) for (const task of commit.tasks) states.set(task.id, task);
  return states;
}

async function tasksAtEnd(world: BrowserCrashWorld): Promise<Map<number, { status: string; state: string }>> {
  const rows = await world.query("SELECT id, status, record ->> '$.state' AS state FROM tasks");
  return new Map(rows.map((row) => [Number(row.id), { status: String(row.status), state: String(row.state) }]));
}

const BUILT_IN: Array<[BrowserInvariant, Check]> = [
  [
    "no-task-lost",
    async (world) => {
      const end = await tasksAtEnd(world);
      const lost = [...lastStates(world.before).keys()].filter((id) => !end.has(id));
      return lost.length > 0 ? `tasks ${lost.join(", ")} were committed before the crash and are gone` : undefined;
    },
  ],
  [
    "settled-never-change",
    async (world) => {
      const end = await tasksAtEnd(world);
      for (const [id, task] of lastStates(world.before)) {
        if (task.status !== "terminal") continue;
        const now = end.get(id);
        if (now && task.state && JSON.stringify(JSON.parse(now.state)) !== JSON.stringify(JSON.parse(task.state)))
          return `task ${id} (${task.kind}) was terminal before the crash and changed: ${task.state} → ${now.state}`;
      }
      return undefined;
    },
  ],
  [
    "no-task-left-live",
    async (world) => {
      const live = [...(await tasksAtEnd(world))].filter(([, task]) => task.status !== "terminal");
      return live.length > 0 ? `tasks left live: ${live.map(([id, task]) => `${id} ${task.status}`).join(", ")}` : undefined;
    },
  ],
  [
    "effects-at-most-once",
    async (world) => {
      const twice = [...world.effects].filter(([, times]) => times > 1);
      return twice.length > 0
        ? `side effects happened more than once: ${twice.map(([key, times]) => `${key} ×${times}`).join(", ")}`
        : undefined;
    },
  ],
  [
    "applied-once",
    async (world) => {
      const doubled = await world.query(
        "SELECT record ->> '$.payload.submissionId' AS submission, count(*) AS n FROM entries WHERE kind = 'pi.user' GROUP BY submission HAVING n > 1",
      );
      if (doubled.length > 0) return `submission ${doubled[0]!.submission} was placed ${doubled[0]!.n} times`;
      const keys = new Map<string, number>();
      for (const commit of [...world.before, ...world.after]) {
        for (const { key, taskId } of commit.keys) {
          const first = keys.get(key);
          if (first !== undefined && first !== taskId) return `task key ${key} named task ${first}, then task ${taskId}`;
          keys.set(key, taskId);
        }
      }
      return undefined;
    },
  ],
  [
    "unsafe-tool-never-rerun",
    async (world) => {
      const resultsBefore = new Set(
        world.before.flatMap((commit) => commit.entries.filter((e) => e.kind === "pi.tool-result").map((e) => e.id)),
      );
      const results = await world.query(
        "SELECT id, record ->> '$.byTaskId' AS task, record ->> '$.payload.code' AS code FROM entries WHERE kind = 'pi.tool-result'",
      );
      for (const [id, task] of lastStates(world.before)) {
        if (task.kind !== "pi.tool" || task.status === "terminal" || task.phase !== "execute" || task.replay === "safe") continue;
        const result = results.find((row) => Number(row.task) === id);
        if (result && !resultsBefore.has(Number(result.id)) && result.code !== "interrupted" && result.code !== "restart_limit")
          return `tool task ${id} had committed its intent (replay unsafe) before the crash and was run again (its result is the tool's own)`;
      }
      return undefined;
    },
  ],
  [
    "no-resend-before-backoff",
    async (world) => {
      const states = lastStates(world.before);
      const inFlight = new Map<string, { run?: number; attempt?: number; requested: boolean }>();
      for (const commit of world.before) for (const live of commit.live) inFlight.set(live.scope, live);
      for (const [scope, live] of inFlight) {
        if (!live.requested || live.run === undefined || states.get(live.run)?.status === "terminal") continue;
        // Until the recovery has counted that attempt as failed (a backoff sleep) or ended the run, no request of
        // the run may be marked as sent (a later turn's requests come after, and are new ones).
        const counted = world.after.findIndex((commit) =>
          commit.tasks.some((task) => task.id === live.run && (task.status === "sleeping" || task.status === "terminal")),
        );
        const resent = world.after
          .slice(0, counted === -1 ? undefined : counted)
          .find((commit) => commit.live.some((next) => next.scope === scope && next.run === live.run && next.requested));
        if (resent)
          return `attempt ${live.attempt} of run ${live.run} was in flight at the crash and was sent again at once (commit r${resent.commit})`;
      }
      return undefined;
    },
  ],
];
