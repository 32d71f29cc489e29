import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Edge, startEdge } from "./support.ts";

let edge: Edge;
beforeAll(async () => {
  edge = await startEdge();
}, 120_000);
afterAll(() => edge?.dispose());

/** `POST /rpc` with a body written by hand (so the input can be deeper than JSON.stringify goes). */
async function rpc(
  body: string,
  object: "counter" | "limited" = "counter",
): Promise<{ status: number; json: { value?: unknown; error?: { name: string; details?: { limit?: string } } } }> {
  const response = await edge.call(object, "limits", "/rpc", { method: "POST", body });
  return { status: response.status, json: await response.json() };
}

describe("R9 on a Durable Object: a deep or huge input is refused before its row is written, and the object opens again", () => {
  it("R9: a 12,000-deep input (23 KiB) and a 3 MB input are 400 InvalidInput; after a cold restart a normal task runs", async () => {
    const deep = `${"[".repeat(12_000)}1${"]".repeat(12_000)}`;
    const refusedDeep = await rpc(`{"method":"createTask","args":["example.counter",${deep}]}`);
    expect(refusedDeep.status).toBe(400);
    expect(refusedDeep.json.error).toMatchObject({ name: "InvalidInput", details: { limit: "maxDepth" } });
    const huge = JSON.stringify({ method: "createTask", args: ["example.counter", { to: 1, pad: "x".repeat(3_000_000) }] });
    const refusedHuge = await rpc(huge);
    expect(refusedHuge.status).toBe(400);
    expect(refusedHuge.json.error).toMatchObject({ name: "InvalidInput", details: { limit: "maxBytes" } });
    expect((await rpc(JSON.stringify({ method: "query", args: ["SELECT count(*) AS n FROM tasks"] }))).json).toEqual({ value: [{ n: 0 }] });

    await edge.restart(); // the eviction: the object opens from its SQLite alone
    const created = await rpc(JSON.stringify({ method: "createTask", args: ["example.counter", { to: 1 }] }));
    expect(created.status).toBe(200);
    const ended = await rpc(JSON.stringify({ method: "waitForTask", args: [created.json.value] }));
    expect(ended.json.value).toMatchObject({ state: { status: "terminal", outcome: { status: "completed" } } });
  }, 120_000);
});

describe("R9 on a Durable Object: a whole row is checked against the 2 MB a row holds (Storage.maxRowBytes)", () => {
  const call = (method: string, ...args: unknown[]) => rpc(JSON.stringify({ method, args }), "limited");

  it("R9/S11: a checkpoint that would make its task's row 2.7 MB (each value 0.9 MB, within maxBytes) is InvalidInput; the row keeps what was committed; after a cold restart the object opens and runs", async () => {
    const created = await call("createTask", "limit.grower", { pad: "x".repeat(900_000) });
    expect(created.status).toBe(200);
    const ended = (await call("waitForTask", created.json.value)).json.value;
    expect(ended).toMatchObject({
      state: { status: "terminal", outcome: { status: "faulted", error: { message: expect.stringContaining("Storage.maxRowBytes") } } },
    });
    // The memo's commit (input + memo: 1.8 MB) was stored; the checkpoint's, carrying the pad a third time, was
    // refused whole: its row would have been 2.7 MB. What is stored is the faulted task, well within a row.
    const refusal = (ended as { state: { outcome: { error: { message: string } } } }).state.outcome.error.message;
    expect(Number(/would be (\d+) bytes, over the 2000000/.exec(refusal)?.[1])).toBeGreaterThan(2_700_000);
    const rows = await call("query", "SELECT length(record) AS bytes, json_type(record, '$.state.checkpoint') AS checkpoint FROM tasks");
    expect(rows.json.value).toEqual([{ bytes: expect.any(Number), checkpoint: null }]);
    expect((rows.json.value as Array<{ bytes: number }>)[0]!.bytes).toBeLessThan(2_000_000);

    await edge.restart();
    const small = await call("createTask", "limit.grower", { pad: "y".repeat(1000) });
    expect((await call("waitForTask", small.json.value)).json.value).toMatchObject({
      state: { status: "terminal", outcome: { status: "completed", result: "grown" } },
    });
  }, 120_000);
});
