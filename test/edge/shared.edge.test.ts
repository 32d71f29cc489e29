import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Edge, startEdge } from "./support.ts";

let edge: Edge;
beforeAll(async () => {
  edge = await startEdge();
}, 120_000);
afterAll(() => edge?.dispose());

const lines = (name: string) =>
  edge.printed.lines.filter((line) => line.startsWith(`${name}: `)).map((line) => line.slice(name.length + 2));

/** The harness's tables, the way the coexistence tests expect them beside the app's. */
const OURS = ["conversations", "documents", "entries", "pi_durable_meta", "submissions", "tasks"];

async function count(name: string, to: number): Promise<unknown> {
  const { id } = await edge.json("shared", name, `/start?to=${to}`);
  return (await edge.json("shared", name, `/wait?id=${id}`)).task.state;
}

describe("S11: the harness beside the app's own tables and KV in one object's SQLite", () => {
  it("S11/S12: the app's table and KV first (before the harness ever opened): the harness opens beside them, both keep working, and after a restart", async () => {
    const app = await edge.json("shared", "app-first-1", "/app");
    expect(app.tables).toEqual(expect.arrayContaining(["_cf_KV", "notes", ...OURS]));
    expect(app.notes).toEqual(["written before the harness"]);
    expect(app.kv).toEqual({ greeting: { from: "the app", before: "the harness" } });
    expect(await count("app-first-1", 2)).toEqual({ status: "terminal", outcome: { status: "completed", result: "counted to 2" } });
    expect((await edge.json("shared", "app-first-1", "/query")).rows).toEqual([
      { id: expect.any(Number), status: "terminal", n: null, memos: null, restarts: null },
    ]);
    await edge.json("shared", "app-first-1", "/kv?key=after&value=harness");
    await edge.restart();
    const again = await edge.json("shared", "app-first-1", "/app");
    expect(again.kv).toEqual({ after: "harness", greeting: { from: "the app", before: "the harness" } });
    expect(await count("app-first-1", 1)).toMatchObject({ status: "terminal" });
    expect(lines("app-first-1")).toEqual(["tick 1", "tick 2", "tick 1"]);
  });

  it("S11: the harness first, then the app's table and KV: the app's rows are kept, the harness reopens after a restart", async () => {
    expect(await count("harness-first-1", 1)).toMatchObject({ status: "terminal" });
    await edge.json("shared", "harness-first-1", "/note?text=after%20the%20harness");
    await edge.json("shared", "harness-first-1", "/kv?key=k&value=v");
    await edge.restart();
    const app = await edge.json("shared", "harness-first-1", "/app");
    expect(app.notes).toEqual(["after the harness"]);
    expect(app.kv).toEqual({ k: "v" });
    expect(await count("harness-first-1", 1)).toMatchObject({ status: "terminal" });
    // The app's table is readable through the harness's read-only query too.
    const rpc = await edge.call("shared", "harness-first-1", "/rpc", {
      method: "POST",
      body: JSON.stringify({ method: "query", args: ["SELECT text FROM notes"] }),
    });
    expect(await rpc.json()).toEqual({ value: [{ text: "after the harness" }] });
  });

  it("S11/S12: an object of schema version 1 migrates on its first open (marker renamed) and its counter goes on from tick 3", async () => {
    const rows = (await edge.json("shared", "legacy-1", "/query")).rows;
    expect(rows).toEqual([{ id: 2, status: "pending", n: 2, memos: '{"printed-1":true,"printed-2":true}', restarts: 1 }]);
    const app = await edge.json("shared", "legacy-1", "/app");
    expect(app.tables).toEqual(expect.arrayContaining(OURS));
    expect(app.tables).not.toContain("meta");
    expect((await edge.json("shared", "legacy-1", "/wait?id=2")).task.state).toMatchObject({ status: "terminal" });
    expect(lines("legacy-1")).toEqual(["tick 3", "tick 4"]);
  });
});
