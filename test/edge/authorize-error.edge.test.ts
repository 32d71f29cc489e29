/**
 * Decision 0117, later (item 6): a Durable Object's `onAuthorizeError` hears its `authorize` hook's own error, in workerd,
 * for `POST /rpc` and a Worker's RPC call through the stub — while the caller gets `AuthorizeFailed` (503 over HTTP)
 * with none of it. A refusal (false) is 403 and tells nobody.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Edge, startEdge } from "./support.ts";

let edge: Edge;
beforeAll(async () => {
  edge = await startEdge();
}, 120_000);
afterAll(() => edge?.dispose());

const rpc = (method: string) => edge.call("doorfail", "d1", "/rpc", { method: "POST", body: JSON.stringify({ method, args: [] }) });

describe("a Durable Object's onAuthorizeError (decision 0117, later)", () => {
  it("0117 later (6): POST /rpc and a stub's RPC whose hook throws: 503 / AuthorizeFailed without the hook's message, and the object's onAuthorizeError told the error, the caller, the action and the door; a refusal tells nobody", async () => {
    const failed = await rpc("listConversations");
    expect(failed.status).toBe(503);
    const body = await failed.text();
    expect(body).toContain("AuthorizeFailed");
    expect(body).not.toContain("db.internal");
    await edge.printed.until((lines) => lines.some((line) => line.includes("authorize failed listConversations")));
    expect(edge.printed.lines).toContain("d1: authorize failed listConversations host null the permission store at db.internal is down");

    const refused = await rpc("inspect");
    expect(refused.status).toBe(403);

    // The Worker's RPC call through the object's stub (`/stub/<object>/<name>`).
    const stub = await edge.call("stub" as never, "doorfail", "/d1", {
      method: "POST",
      body: JSON.stringify({ method: "listConversations" }),
    });
    const viaStub = (await stub.json()) as { error?: { name: string; message: string } };
    // workerd carries a thrown error as an Error whose message starts with the error's name.
    expect(viaStub.error?.message).toMatch(/^AuthorizeFailed: /);
    expect(viaStub.error?.message).not.toContain("db.internal");
    await edge.printed.until((lines) => lines.some((line) => line.includes('{"via":"rpc"}')));
    expect(edge.printed.lines.filter((line) => line.includes("authorize failed"))).toEqual([
      "d1: authorize failed listConversations host null the permission store at db.internal is down",
      'd1: authorize failed listConversations host {"via":"rpc"} the permission store at db.internal is down',
    ]);
  }, 60_000);
});
