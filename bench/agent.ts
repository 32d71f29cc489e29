/**
 * Agent cost per tool call (issue 3, "Speed"): `npx tsx bench/agent.ts`.
 * Node, sqlite-wasm in memory. One faux model turn calls a trivial tool CALLS times (parallel round), then
 * answers. We count the storage commits of the whole run (from submit to the settled answer) and time each
 * one, next to a raw single-row SQLite commit measured in the same run. Each figure is the median of RUNS.
 * Target: fewer commits than tool calls (group commit, decision 0026), each call's share at most 3× a raw commit.
 */
import { writeFileSync } from "node:fs";
import { createModels, fauxAssistantMessage, fauxProvider, fauxText, fauxToolCall } from "@earendil-works/pi-ai";
import {
  type Batch,
  createRegistry,
  BACKGROUND_CONTEXT as ctx,
  defineExtension,
  defineTool,
  Harness,
  type SqliteDatabase,
} from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import type { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { openSqliteDatabase, sqliteVersion } from "../src/storage/sqlite/wasm.ts";
import { fmt, summarize, table } from "./stats.ts";

const CALLS = 200;
const RUNS = 7;
const RAW_COMMITS = 2000;

const noop = defineTool({
  name: "noop",
  description: "Does nothing",
  parameters: { type: "object", properties: { i: { type: "integer" } }, required: ["i"] },
  replay: "safe",
  execute: () => "ok",
});

/**
 * A raw single-row commit: one UPDATE transaction through the same database facade, on `db`, writing a JSON
 * record as large as a tool task's (`like`), serialized per commit — what an app pays to store that state itself.
 */
async function rawCommitMicros(
  db?: SqliteDatabase,
  like: object = { id: 1, state: { status: "running", checkpoint: { phase: "execute", arguments: { i: 1 }, replay: "safe" } } },
): Promise<number> {
  const own = db ?? (await openSqliteDatabase({ vfs: "memory" }));
  await own.exec(
    "CREATE TABLE IF NOT EXISTS bench_raw (id INTEGER PRIMARY KEY, record TEXT NOT NULL); INSERT OR REPLACE INTO bench_raw VALUES (1, '{}')",
  );
  const start = performance.now();
  for (let i = 0; i < RAW_COMMITS; i++) {
    const record = JSON.stringify({ ...like, n: i });
    await own.transaction((tx) => tx.run("UPDATE bench_raw SET record = ? WHERE id = 1", record));
  }
  const micros = ((performance.now() - start) * 1000) / RAW_COMMITS;
  if (!db) await own.close();
  return micros;
}

interface AgentRun {
  totalMs: number;
  /** From the commit that starts the tool round to the last tool result. */
  toolPhaseMs: number;
  /** Every batch the run stored, in order (copies). */
  batches: Batch[];
}

async function agentRun(): Promise<AgentRun> {
  const storage: SqliteStorage = await openSqliteStorage({ vfs: "memory" });
  const faux = fauxProvider({ api: "faux", provider: "faux" });
  const models = createModels();
  models.setProvider(faux.provider);
  const calls = Array.from({ length: CALLS }, (_, i) => fauxToolCall("noop", { i }, { id: `call_${i}` }));
  faux.setResponses([fauxAssistantMessage(calls, { stopReason: "toolUse" }), fauxAssistantMessage(fauxText("done"))]);
  const registry = createRegistry().install(defineExtension({ name: "bench", tools: [noop] }));
  const harness = await Harness.open(storage, { registry, models }, ctx);
  const root = await harness.root(ctx, { agent: { model: "faux/faux-1" } });

  const batches: Batch[] = [];
  const apply = storage.apply.bind(storage);
  storage.apply = (batch: Batch) => {
    batches.push(structuredClone(batch));
    return apply(batch);
  };
  let roundStart = 0;
  let lastResult = 0;
  harness.onCommit(({ batch }) => {
    for (const task of batch.tasks) {
      if (task.kind !== "pi.tool") continue;
      if (task.state.status === "pending" && roundStart === 0) roundStart = performance.now();
      if (task.state.status === "terminal") lastResult = performance.now();
    }
  });
  const start = performance.now();
  const outcome = await (await root.submit({ type: "input", content: "call noop 200 times" }, ctx)).wait(ctx);
  const totalMs = performance.now() - start;
  if (outcome.status !== "done") throw new Error(`bench run did not finish: ${JSON.stringify(outcome)}`);
  const results = (await root.entries(ctx)).filter((entry) => entry.kind === "pi.tool-result").length;
  if (results !== CALLS) throw new Error(`expected ${CALLS} tool results, got ${results}`);
  storage.apply = apply;
  await harness.close(ctx);
  await storage.close();
  return { totalMs, toolPhaseMs: lastResult - roundStart, batches };
}

/**
 * Each commit's own cost: the run's batches applied one after another to a fresh database, timed one by one.
 * (Timing them inside the run would also count the reads of 200 concurrent tool calls queued on the same
 * database connection, which is contention, not commit cost.)
 */
type CommitKind = "intent" | "result" | "other";
async function replayMicros(
  batches: Batch[],
): Promise<{ raw: number; commits: Array<{ micros: number; rows: number; kind: CommitKind }> }> {
  const storage = await openSqliteStorage({ vfs: "memory" });
  // The baseline is measured on the same database right before the replay: same conditions, same moment.
  const toolTask = batches.flatMap((batch) => batch.tasks).find((task) => task.kind === "pi.tool" && task.state.status === "running");
  const raw = await rawCommitMicros(storage.database, toolTask);
  const out: Array<{ micros: number; rows: number; kind: CommitKind }> = [];
  for (const batch of batches) {
    const start = performance.now();
    await storage.apply(batch);
    const micros = (performance.now() - start) * 1000;
    const rows = batch.tasks.length + batch.entries.length + batch.documents.length + batch.submissions.length + batch.conversations.length;
    // Group commit (decision 0026) stores the intents (or results) of many calls in one transaction: a commit
    // of only tool tasks counts per call (its time over the calls it carries).
    const calls = batch.tasks.length;
    const tools = calls > 0 && batch.tasks.every((task) => task.kind === "pi.tool");
    const kind: CommitKind =
      tools && rows === calls && batch.tasks.every((task) => task.state.status === "running" && task.state.checkpoint.phase === "execute")
        ? "intent"
        : tools && batch.entries.length === calls && batch.tasks.every((task) => task.state.status === "terminal")
          ? "result"
          : "other";
    out.push({ micros: kind === "other" ? micros : micros / calls, rows, kind });
  }
  await storage.close();
  return { raw, commits: out };
}

const median = (values: number[]) => summarize(values).median;
const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};

export async function benchAgent() {
  await rawCommitMicros();
  await agentRun(); // warm up wasm and the JIT
  const raw: number[] = [];
  const runs: AgentRun[] = [];
  for (let run = 0; run < RUNS; run++) runs.push(await agentRun());

  const commitsPerCall = summarize(runs.map((run) => run.batches.length / CALLS));
  const harnessMicrosPerCall = summarize(runs.map((run) => (run.totalMs * 1000) / CALLS));
  const toolPhaseMicrosPerCall = summarize(runs.map((run) => (run.toolPhaseMs * 1000) / CALLS));
  const replays: Array<Array<{ micros: number; rows: number; kind: CommitKind }>> = [];
  for (const run of runs) {
    const replay = await replayMicros(run.batches);
    raw.push(replay.raw);
    replays.push(replay.commits);
  }
  // Per-call commits: the intent (the task's checkpoint) and the result (task + entry). The few per-run
  // commits (admission, the round start creating 200 tasks, the scheduler's reservation pass, the answer)
  // are reported apart.
  const rawMicros = summarize(raw);
  const perCall = replays.map((replay) => replay.filter((commit) => commit.kind !== "other").map((commit) => commit.micros));
  const perCallMedian = summarize(perCall.map((values) => median(values)));
  const perCallP95 = summarize(perCall.map((values) => percentile(values, 95)));
  const intentMedian = summarize(
    replays.map((replay) => median(replay.filter((commit) => commit.kind === "intent").map((commit) => commit.micros))),
  );
  const resultMedian = summarize(
    replays.map((replay) => median(replay.filter((commit) => commit.kind === "result").map((commit) => commit.micros))),
  );
  const roundStart = replays[0]!.reduce((a, b) => (b.rows > a.rows ? b : a));
  const ratio = perCallMedian.median / rawMicros.median;
  const result = {
    name: "agent",
    environment: { node: process.version, sqlite: await sqliteVersion(), platform: `${process.platform}-${process.arch}` },
    toolCalls: CALLS,
    runs: RUNS,
    rawCommitMicros: rawMicros,
    commitsPerToolCall: commitsPerCall,
    perCallCommitMicros: { median: perCallMedian, p95: perCallP95, intent: intentMedian, result: resultMedian },
    perCallCommitRatio: ratio,
    harnessMicrosPerToolCall: harnessMicrosPerCall,
    toolPhaseMicrosPerToolCall: toolPhaseMicrosPerCall,
    roundStartCommit: roundStart,
    target: "fewer commits than tool calls (group commit), each call's share ≤ 3× a raw commit",
    meetsTarget: commitsPerCall.median < 1 && ratio <= 3,
  };
  const rows = [
    ["raw single-row SQLite commit (a tool task's JSON size)", `${fmt(rawMicros.median)} µs`, "1.00×"],
    ["commits per tool call", fmt(commitsPerCall.median, 2), "target < 1 (fewer commits than calls)"],
    [
      "per-call commit, median / p95",
      `${fmt(perCallMedian.median)} / ${fmt(perCallP95.median)} µs`,
      `${fmt(ratio, 2)}× / ${fmt(perCallP95.median / rawMicros.median, 2)}× (target ≤ 3×)`,
    ],
    ["  intent commit (checkpoint execute)", `${fmt(intentMedian.median)} µs`, `${fmt(intentMedian.median / rawMicros.median, 2)}×`],
    ["  result commit (entry + terminal task)", `${fmt(resultMedian.median)} µs`, `${fmt(resultMedian.median / rawMicros.median, 2)}×`],
    [
      "round-start commit (once per round)",
      `${fmt(roundStart.micros)} µs, ${roundStart.rows} rows`,
      `${fmt(roundStart.micros / rawMicros.median, 0)}×`,
    ],
    [
      "harness time per tool call (tool phase)",
      `${fmt(toolPhaseMicrosPerCall.median)} µs`,
      `${fmt(toolPhaseMicrosPerCall.median / rawMicros.median, 1)}×`,
    ],
    [
      "whole run per tool call (incl. faux model)",
      `${fmt(harnessMicrosPerCall.median)} µs`,
      `${fmt(harnessMicrosPerCall.median / rawMicros.median, 1)}×`,
    ],
  ];
  const printed = table([`Node, sqlite-wasm memory, ${CALLS} parallel calls, median of ${RUNS}`, "value", "vs raw"], rows);
  return { result, printed };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { result, printed } = await benchAgent();
  console.log(printed);
  console.log(`\ntarget (fewer commits than calls, each call's share ≤ 3× raw): ${result.meetsTarget ? "met" : "NOT met"}`);
  writeFileSync(new URL("./results-agent.json", import.meta.url), `${JSON.stringify(result, null, 2)}\n`);
}
