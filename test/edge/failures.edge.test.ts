import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HarnessClient } from "../../src/browser/client.ts";
import { DatabaseCorrupt } from "../../src/index.ts";
import { type Edge, edgeSocket, pause, startEdge } from "./support.ts";

let edge: Edge;
beforeAll(async () => {
  edge = await startEdge();
}, 120_000);
afterAll(() => edge?.dispose());

const rpc = (object: "counter" | "shared", name: string, method: string, ...args: unknown[]) =>
  edge.call(object, name, "/rpc", { method: "POST", body: JSON.stringify({ method, args }) });

/** A raw socket to an object: frames sent as given, answers collected as parsed JSON. */
async function rawSocket(name: string) {
  const response = await edge.call("counter", name, "/", { headers: { Upgrade: "websocket" } });
  const ws = (response as unknown as { webSocket: any }).webSocket;
  ws.accept();
  const answers: any[] = [];
  ws.addEventListener("message", (event: { data: string }) => void answers.push(JSON.parse(event.data)));
  return {
    answers,
    send: (frame: string | ArrayBuffer) => ws.send(frame),
    async answer(id: number | null, count = 1): Promise<any[]> {
      for (let i = 0; i < 500 && answers.filter((a) => a.id === id).length < count; i++) await pause(10);
      return answers.filter((a) => a.id === id);
    },
    close: () => ws.close(),
  };
}

describe("clear failures on a Durable Object", () => {
  it("a failed open answers every request with JSON { error: { name, message } } and 503, and stays failed (no reset loop)", async () => {
    for (const response of [await rpc("shared", "clash-1", "status"), await edge.call("shared", "clash-1", "/query")]) {
      expect(response.status).toBe(503);
      expect(response.headers.get("content-type")).toMatch(/json/);
      const body = await response.json();
      expect(body).toEqual({ error: { name: "DatabaseCorrupt", message: expect.stringMatching(/\(tasks\).*Rename the app's tables/) } });
    }
    expect((await edge.json("shared", "clash-1", "/app")).tables).toEqual(["tasks"]); // nothing of ours was written
  });

  it("a socket to an object whose open failed gets the failed status with the typed cause; its calls reject with it", async () => {
    const client = new HarnessClient({ url: "ws://edge/shared/clash-2", connect: () => edgeSocket(edge, "shared", "clash-2") });
    const error = await client.ready().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DatabaseCorrupt);
    expect(client.status).toMatchObject({ kind: "failed", error: { name: "DatabaseCorrupt", message: expect.stringContaining("tasks") } });
    await expect(client.inspect()).rejects.toThrow(/not open \(status: failed\)/);
    await client.close();
  });

  it("malformed socket frames get an InvalidRequest answer (with the frame's id when it had one), never an uncaught exception", async () => {
    const socket = await rawSocket("frames");
    const before = edge.runtimeErrors.length;
    for (const frame of ["not json", "[1,2]", "null", '"call"', '{"type":"call"}', '{"id":0,"type":"call","method":"status"}']) {
      socket.send(frame);
    }
    socket.send(new TextEncoder().encode("\u0000\u0001 binary").buffer as ArrayBuffer);
    socket.send('{"type":"call","id":7}');
    socket.send('{"type":"call","id":8,"method":"status","args":5}');
    socket.send('{"type":"bogus","id":9,"method":"status"}');
    socket.send('{"type":"call","id":10,"method":"status","args":[]}');
    const unnamed = await socket.answer(null, 7);
    expect(unnamed).toHaveLength(7);
    for (const answer of unnamed) expect(answer).toMatchObject({ type: "error", id: null, error: { name: "InvalidRequest" } });
    for (const id of [7, 8, 9]) {
      expect(await socket.answer(id)).toEqual([{ type: "error", id, error: expect.objectContaining({ name: "InvalidRequest" }) }]);
    }
    expect(await socket.answer(10)).toEqual([{ type: "result", id: 10, value: expect.objectContaining({ kind: "ready" }) }]);
    socket.close();
    await pause(100);
    expect(edge.runtimeErrors.slice(before).join("")).not.toMatch(/Uncaught|SyntaxError|TypeError/);
  });

  it("client.close() on a URL client ends in the closed status; the object names client.close() for pages", async () => {
    const client = new HarnessClient({ url: "ws://edge/counter/leaving", connect: () => edgeSocket(edge, "counter", "leaving") });
    await client.ready();
    const statuses: string[] = [];
    client.onStatus((status) => void statuses.push(status.kind));
    await client.close();
    await pause(100);
    expect(client.status).toEqual({ kind: "closed", reason: "close" });
    expect(statuses).toEqual(["ready", "closed"]);
    await expect(client.ready()).rejects.toThrow(/closed/);
    const refused = await (await rpc("counter", "leaving", "close")).json();
    expect(refused.error).toMatchObject({ name: "MethodNotServed", message: expect.stringContaining("client.close()") });
    expect(refused.error.message).not.toMatch(/terminate/);
  });
});

describe("typed RPC: a Worker calls the object's client API through its stub, without HTTP", () => {
  const viaStub = async (object: string, name: string, method: string, ...args: unknown[]) =>
    (await edge.call("stub" as never, object, `/${name}`, { method: "POST", body: JSON.stringify({ method, args }) })).json();

  it("createTask, waitForTask and query by RPC run the task on the object; the work starts as after a request", async () => {
    const id = (await viaStub("counter", "rpc", "createTask", "example.counter", { to: 2 })).value;
    expect(typeof id).toBe("number");
    expect((await viaStub("counter", "rpc", "waitForTask", id)).value.state).toEqual({
      status: "terminal",
      outcome: { status: "completed", result: "counted to 2" },
    });
    expect((await viaStub("counter", "rpc", "query", "SELECT count(*) AS n FROM tasks")).value).toEqual([{ n: 1 }]);
    expect((await viaStub("counter", "rpc", "status")).value).toMatchObject({ kind: "ready" });
  });

  it("RPC errors carry the library's name; what pages may not call is not an RPC method; a failed open is the open's error", async () => {
    const missing = (await viaStub("counter", "rpc-errors", "waitForTask", 999_999)).error;
    // workerd carries a thrown error as an Error whose message starts with the error's name.
    expect(missing.message).toMatch(/^NotFound: Task 999999/);
    expect((await viaStub("counter", "rpc-errors", "createTask", "no.such.kind", null)).error).toMatchObject({
      message: expect.stringMatching(/^UnknownTaskKind: /),
    });
    // The same doors as a page's call: a power the object does not turn on is refused (the counter's are
    // createTask and query).
    expect((await viaStub("counter", "rpc-errors", "abortTask", 1)).error.message).toMatch(/^NotAuthorized: .*powers/);
    for (const method of ["close", "requestTakeover", "lifeLock"]) {
      expect((await viaStub("counter", "rpc-errors", method)).error, method).toBeDefined();
    }
    expect((await viaStub("shared", "clash-rpc", "inspect")).error.message).toMatch(/^DatabaseCorrupt: .*\(tasks\)/);
  });
});
