/**
 * `npm run example:counter -- --edge`: the seed's Example 12 on a local Durable Object in workerd. The object
 * prints tick 1 and tick 2 and then aborts itself (`ctx.abort()`, a real crash of the object); the next request
 * starts it again — the harness opens, counts the restart — and answers with the seed's query; then the work
 * resumes: tick 3, tick 4, tick 5, counted to 5.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Miniflare } from "miniflare";
import { SEED_QUERY } from "./counter-task.ts";
import { bundleWorker, quietRuntime, sqliteObject, workerModules } from "./local-edge.ts";

type Reply = {
  instance: string;
  id?: number;
  rows?: Record<string, unknown>[];
  task?: { state: { status: string; outcome?: { result?: unknown } } };
};

export async function runCounterOnEdge(): Promise<void> {
  const persist = mkdtempSync(join(tmpdir(), "pi-durable-counter-"));
  let printedTick2: () => void;
  const tick2 = new Promise<void>((resolve) => (printedTick2 = resolve));
  const mf = new Miniflare({
    modules: workerModules(await bundleWorker(new URL("./counter-object.ts", import.meta.url))),
    compatibilityDate: "2026-04-01",
    handleRuntimeStdio: quietRuntime,
    durableObjectsPersist: persist,
    durableObjects: { COUNTER: sqliteObject("CounterObject") },
    serviceBindings: {
      PRINT: async (request: { text(): Promise<string> }) => {
        const line = (await request.text()).replace(/^[^:]*: /, "");
        console.log(line);
        if (line === "tick 2") printedTick2();
        return new Response("ok");
      },
    },
  });
  const call = async (path: string): Promise<Response> => (await mf.dispatchFetch(`http://edge/counter${path}`)) as unknown as Response;
  try {
    const started = (await (await call("/start?to=5&abortAfter=tick%202")).json()) as Reply;
    await tick2;
    console.log("\n-- the object aborted itself right after tick 2 (ctx.abort): its memory is gone, its SQLite stays");
    const revived = await nextInstance(call, "/query", started.instance);
    console.log(`-- the next request started the object again; the harness opened before answering it:\n${SEED_QUERY}`);
    console.table(revived.rows);
    const done = (await (await call(`/wait?id=${started.id}`)).json()) as Reply;
    if (done.task?.state.status === "terminal") console.log(done.task.state.outcome?.result);
    console.log(`\n-- at the end:\n${SEED_QUERY}`);
    console.table(((await (await call("/query")).json()) as Reply).rows);
  } finally {
    await mf.dispose();
    rmSync(persist, { recursive: true, force: true });
  }
}

/** Asks until a new instance of the object answers (a request can still reach the dying one). */
async function nextInstance(call: (path: string) => Promise<Response>, path: string, previous: string): Promise<Reply> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const response = await call(path);
    const reply = (await response.json().catch(() => undefined)) as Reply | undefined;
    if (response.ok && reply && reply.instance !== previous) return reply;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error("The object did not start again.");
}
