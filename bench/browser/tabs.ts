/**
 * Every tab is live (src/browser/tabs.ts), measured on the demo app's production build in Chromium:
 *
 * (a) a call's round trip from a follower tab (its page → BroadcastChannel → the leader tab's worker → back)
 *     next to the same call from the leader tab (its page → its own worker over comlink): a read-only
 *     `client.query("SELECT 1")` and a write submission (`client.submit`, one commit), medians of many.
 * (b) leader loss → a follower ready with the recovered view: the leader tab is closed; the time from just
 *     before the close to the moment the follower's client is ready as the new leader (its worker opened the
 *     database and recovered) and its conversation view has the new leader's snapshot. Taken in turns: each
 *     round opens a new follower, closes the leader, and the old follower leads the next round.
 *
 * Times in the pages are `performance.timeOrigin + performance.now()`, on the same clock as Node's `Date.now()`.
 */
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { Page } from "playwright-core";
import { fmt, type Summary, summarize, table } from "../stats.ts";
import { type Row, rowCells } from "./ours.ts";
import { buildPage, launchChromium, ROOT, serveStatic, waitInPage } from "./support.ts";

const QUICK = process.env.BENCH_QUICK === "1";
const CALLS = QUICK ? 100 : 400;
const ROUNDS = QUICK ? 3 : 7;

interface HostPage {
  client: {
    status: { kind: string; role?: string };
    query(sql: string): Promise<unknown>;
    rootConversation(): Promise<number>;
    submit(conversationId: number, draft: unknown): Promise<number>;
    onStatus(listener: (status: { kind: string; role?: string }) => void): () => void;
    watchConversation(id: number, listener: (view: unknown) => void): Promise<() => void>;
  };
}

async function openTab(open: () => Promise<Page>, url: string, role: string): Promise<Page> {
  const page = await open();
  await page.goto(url);
  await waitInPage(page, (role) => (globalThis as unknown as { pi?: HostPage }).pi?.client.status.role === role, 60_000, 10, role);
  return page;
}

/** Median round trip (ms) of `kind` calls made one after another from the page. */
function roundTrips(page: Page, kind: "query" | "submit", calls: number): Promise<number[]> {
  return page.evaluate(
    async ([kind, calls]) => {
      // (No named functions in here: tsx would wrap them in a helper the page does not have.)
      const { client } = (globalThis as unknown as { pi: HostPage }).pi;
      const root = await client.rootConversation();
      const times: number[] = [];
      for (let call = -20; call < calls; call++) {
        const started = performance.now();
        if (kind === "query") await client.query("SELECT 1");
        else await client.submit(root, { type: "write", entry: { kind: "bench.mark", data: 1 } });
        if (call >= 0) times.push(performance.now() - started); // the first 20 warm up
      }
      return times;
    },
    [kind, calls] as const,
  );
}

/** Starts recording, in the follower, when it becomes the leader and when its view next arrives after that. */
async function watchHandOver(page: Page): Promise<void> {
  await page.evaluate(async () => {
    const { client } = (globalThis as unknown as { pi: HostPage }).pi;
    const state: { leaderAt?: number; viewAt?: number } = {};
    (globalThis as { benchHandOver?: typeof state }).benchHandOver = state;
    client.onStatus((status) => {
      if (status.kind === "ready" && status.role === "leader" && state.leaderAt === undefined)
        state.leaderAt = performance.timeOrigin + performance.now();
    });
    await client.watchConversation(await client.rootConversation(), () => {
      if (state.leaderAt !== undefined && state.viewAt === undefined) state.viewAt = performance.timeOrigin + performance.now();
    });
  });
}

export async function benchTabs(): Promise<{ result: unknown; rows: Row[] }> {
  await buildPage(join(ROOT, "vite.config.ts"));
  const server = await serveStatic(join(ROOT, "dist"));
  const browser = await launchChromium({ blockServiceWorkers: true });
  try {
    const open = () => browser.newPage();
    let leader = await openTab(open, server.url, "leader");
    let follower = await openTab(open, server.url, "follower");
    // Many calls each: keep the median, min and max, not every run.
    const median = async (times: Promise<number[]>) => ({ ...summarize(await times), runs: [] });
    const calls = {
      queryLeader: await median(roundTrips(leader, "query", CALLS)),
      queryFollower: await median(roundTrips(follower, "query", CALLS)),
      submitLeader: await median(roundTrips(leader, "submit", CALLS)),
      submitFollower: await median(roundTrips(follower, "submit", CALLS)),
    };
    const handOvers: number[] = [];
    const views: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      await watchHandOver(follower);
      const closedAt = Date.now();
      await leader.close();
      const { leaderAt, viewAt } = await waitInPage(follower, () => {
        const state = (globalThis as unknown as { benchHandOver: { leaderAt: number; viewAt?: number } }).benchHandOver;
        return state.viewAt !== undefined ? state : undefined;
      }).then((state) => state!);
      handOvers.push(leaderAt! - closedAt);
      views.push(viewAt! - closedAt);
      leader = follower;
      follower = await openTab(open, server.url, "follower");
      process.stderr.write(`  tabs: hand-over ${round + 1}/${ROUNDS}\n`);
    }
    return report(calls, summarize(handOvers), summarize(views));
  } catch (error) {
    if (browser.logs.length) console.error(`browser log:\n  ${browser.logs.slice(-30).join("\n  ")}`);
    throw error;
  } finally {
    await browser.close();
    await server.close();
  }
}

function report(
  calls: { queryLeader: Summary; queryFollower: Summary; submitLeader: Summary; submitFollower: Summary },
  handOver: Summary,
  view: Summary,
): { result: unknown; rows: Row[] } {
  const bench = "browser tabs";
  const ms = (summary: Summary, digits = 2) => `${fmt(summary.median, digits)} ms`;
  const range = (summary: Summary, digits = 2) => `${fmt(summary.min, digits)}–${fmt(summary.max, digits)} ms`;
  const queryRatio = calls.queryFollower.median / calls.queryLeader.median;
  const submitRatio = calls.submitFollower.median / calls.submitLeader.median;
  const rows: Row[] = [
    {
      bench,
      what: "leader tab's call round trip, query(SELECT 1)",
      median: ms(calls.queryLeader),
      range: range(calls.queryLeader),
      ratio: "1.00×",
      target: "",
    },
    {
      bench,
      what: "follower tab's call round trip, query(SELECT 1) (through the leader's worker)",
      median: ms(calls.queryFollower),
      range: range(calls.queryFollower),
      ratio: `${fmt(queryRatio, 2)}× leader`,
      target: "",
    },
    {
      bench,
      what: "leader tab's submit (a write, one commit)",
      median: ms(calls.submitLeader),
      range: range(calls.submitLeader),
      ratio: "1.00×",
      target: "",
    },
    {
      bench,
      what: "follower tab's submit (a write, one commit)",
      median: ms(calls.submitFollower),
      range: range(calls.submitFollower),
      ratio: `${fmt(submitRatio, 2)}× leader`,
      target: "",
    },
    {
      bench,
      what: "leader tab closed → a follower is the leader (opened, recovered)",
      median: ms(handOver, 0),
      range: range(handOver, 0),
      ratio: "",
      target: "",
    },
    {
      bench,
      what: "leader tab closed → that follower shows the recovered view",
      median: ms(view, 0),
      range: range(view, 0),
      ratio: "",
      target: "",
    },
  ];
  return { result: { calls: CALLS, rounds: ROUNDS, ...calls, queryRatio, submitRatio, handOver, view }, rows };
}

// `npx tsx bench/browser/tabs.ts`: this section alone.
if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const { rows } = await benchTabs();
  console.log(table(["bench", "what", "median", "min–max", "ratio", "target"], rows.map(rowCells)));
}
