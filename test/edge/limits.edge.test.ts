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
): Promise<{ status: number; json: { value?: unknown; error?: { name: string; details?: { limit?: string } } } }> {
  const response = await edge.call("counter", "limits", "/rpc", { method: "POST", body });
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
