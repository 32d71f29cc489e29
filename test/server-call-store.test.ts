import { describe, expect, it } from "vitest";
import { sqlServerCallStore } from "../src/cloudflare/server-call-store.ts";
import type { SqlStorage } from "../src/cloudflare/types.ts";
import { memoryArbiter } from "../src/follow/arbiter.ts";
import { ServerCalls } from "../src/follow/server-calls.ts";
import type { ServerCallRequest } from "../src/index.ts";
import { loadSqlite } from "../src/storage/sqlite/wasm/module.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { chargeTool } from "./server-tools-support.ts";
import { ctx } from "./support.ts";

// Decision 0036: the object keeps its server calls in a table of its own SQLite (`ctx.storage.sql`; here the same
// statements on sqlite-wasm through a synchronous adapter of the same shape). What a restarted object finds there
// decides: an answer is given again, a call it started and never answered is the interruption (S8), never a rerun.

async function sqlOnWasm(): Promise<SqlStorage> {
  const sqlite3 = await loadSqlite();
  const db = new sqlite3.oo1.DB(":memory:", "c");
  return {
    exec(query, ...bindings) {
      const rows = db.exec({ sql: query, bind: bindings as never, returnValue: "resultRows", rowMode: "object" }) as Record<
        string,
        unknown
      >[];
      return Object.assign(rows[Symbol.iterator].bind(rows), { toArray: () => rows, rowsRead: 0, rowsWritten: 0 }) as never;
    },
    get databaseSize() {
      return 0;
    },
  };
}

const request: ServerCallRequest = {
  place: "tab",
  epoch: 1,
  conversationId: 4,
  taskId: 9,
  callId: "call_1",
  tool: "charge",
  arguments: { amount: 5 },
  replay: "unsafe",
};

describe("the object's table of server calls (decision 0036)", () => {
  it("S8 an answer survives a restart of the object and is given again; the tool ran once", async () => {
    const sql = await sqlOnWasm();
    const clock = createManualClock(1_000);
    const arbiter = memoryArbiter({ clock });
    await arbiter.acquire("tab", 0);
    const world = { runs: [] as string[], gate: {} };
    const object = () =>
      new ServerCalls({ lease: arbiter, store: sqlServerCallStore(sql), clock, tool: () => chargeTool("object", world) });
    const first = await object().call(request, ctx);
    const again = await object().call(request, ctx); // a new instance over the same table: the object restarted
    expect(again).toEqual(first);
    expect(first.result.content).toEqual([{ type: "text", text: "charged 5" }]);
    expect(world.runs).toEqual(["object:call_1"]);
    expect(sql.exec("SELECT conversation_id, call_id FROM pi_durable_server_calls").toArray()).toEqual([
      { conversation_id: 4, call_id: "call_1" },
    ]);
  });

  it("S8 a call the object started and never answered (it crashed while the tool ran) is interrupted at the next ask, not run again", async () => {
    const sql = await sqlOnWasm();
    const clock = createManualClock(1_000);
    const arbiter = memoryArbiter({ clock });
    await arbiter.acquire("tab", 0);
    const world = { runs: [] as string[], gate: { wait: new Promise<void>(() => {}) } }; // the first run never returns
    const dead = new ServerCalls({ lease: arbiter, store: sqlServerCallStore(sql), clock, tool: () => chargeTool("object", world) });
    void dead.call(request, ctx);
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(world.runs).toEqual(["object:call_1"]);
    world.gate = {} as never;
    const restarted = new ServerCalls({ lease: arbiter, store: sqlServerCallStore(sql), clock, tool: () => chargeTool("object", world) });
    const answer = await restarted.call(request, ctx);
    expect(answer.ending).toBe("interrupted");
    expect(answer.result.isError).toBe(true);
    expect(world.runs).toEqual(["object:call_1"]);
    expect(await restarted.call(request, ctx)).toEqual(answer);
  });

  it("decision 0039: a new call drops the calls whose tool task is terminal in the object's copy; a call of a live or unseen task stays", async () => {
    const sql = await sqlOnWasm();
    sql.exec("CREATE TABLE tasks (id INTEGER PRIMARY KEY, conversation_id INTEGER, kind TEXT, status TEXT, record TEXT)");
    const clock = createManualClock(1_000);
    const arbiter = memoryArbiter({ clock });
    await arbiter.acquire("tab", 0);
    const world = { runs: [] as string[], gate: {} };
    const calls = new ServerCalls({ lease: arbiter, store: sqlServerCallStore(sql), clock, tool: () => chargeTool("object", world) });
    await calls.call(request, ctx); // task 9
    await calls.call({ ...request, taskId: 10, callId: "call_2" }, ctx);
    await calls.call({ ...request, taskId: 11, callId: "call_3" }, ctx); // its task not in the copy yet
    sql.exec("INSERT INTO tasks VALUES (9, 4, 'pi.tool', 'terminal', '{}'), (10, 4, 'pi.tool', 'running', '{}')");
    await calls.call({ ...request, taskId: 12, callId: "call_4" }, ctx);
    const kept = sql.exec("SELECT call_id FROM pi_durable_server_calls ORDER BY call_id").toArray();
    expect(kept).toEqual([{ call_id: "call_2" }, { call_id: "call_3" }, { call_id: "call_4" }]);
    // The live task's call still answers from the store: the tool is not run again.
    await calls.call({ ...request, taskId: 10, callId: "call_2" }, ctx);
    expect(world.runs).toEqual(["object:call_1", "object:call_2", "object:call_3", "object:call_4"]);
  });
});
