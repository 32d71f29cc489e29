import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SEED_QUERY } from "../../examples/counter-task.ts";
import { HarnessClient } from "../../src/browser/client.ts";
import type { SocketLike } from "../../src/browser/socket.ts";
import type { Inspection } from "../../src/index.ts";
import { type Edge, edgeSocket, type ObjectKind, pause, startEdge } from "./support.ts";

let edge: Edge;
beforeAll(async () => {
  edge = await startEdge();
}, 120_000);
afterAll(() => edge?.dispose());

/** A WebSocket to an object through miniflare, shaped like the browser's. */
const objectSocket = (name: string, object: ObjectKind = "counter"): SocketLike => edgeSocket(edge, object, name);

async function until(done: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500 && !done(); i++) await pause(20);
  if (!done()) throw new Error(`never: ${what}`);
}

describe("the Durable Object host serves the client API (src/host) over a WebSocket and over HTTP", () => {
  it("connectHarness(url)'s client: status, tasks, read-only SQL; after the object restarts the subscriptions resume", async () => {
    const client = new HarnessClient({ url: "ws://edge/counter/socket", connect: () => objectSocket("socket") });
    await client.ready();
    expect(client.status).toMatchObject({ kind: "ready", database: "durable-object:socket" });
    const graphs: Inspection[] = [];
    await client.watchTasks((inspection: Inspection) => void graphs.push(inspection));

    const first = await client.createTask("example.counter", { to: 2 });
    expect((await client.waitForTask(first)).state).toEqual({
      status: "terminal",
      outcome: { status: "completed", result: "counted to 2" },
    });
    expect(await client.query(SEED_QUERY)).toEqual([{ id: first, status: "terminal", n: null, memos: null, restarts: null }]);
    await expect(client.query("DELETE FROM tasks")).rejects.toMatchObject({ name: "QueryNotReadOnly" });

    // Every object goes away (workerd restarts): the socket drops, the client reconnects and subscribes again.
    const before = graphs.length;
    await edge.restart();
    await until(() => graphs.length > before, "a task graph from the restarted object");
    const second = await client.createTask("example.counter", { to: 1 });
    await until(
      () => graphs.some((graph) => graph.tasks.some((task) => task.record.id === second)),
      "the new task in the resumed subscription",
    );
    expect((await client.waitForTask(second)).state).toMatchObject({ status: "terminal" });
    expect(client.status.kind).toBe("ready");
  });

  it("a page stays connected while the object hibernates: the call that wakes it is answered, and its subscriptions go on", async () => {
    let sockets = 0;
    const connect = () => {
      sockets += 1;
      return objectSocket("idle", "hibernating");
    };
    const client = new HarnessClient({ url: "ws://edge/hibernating/idle", connect });
    await client.ready();
    const graphs: Inspection[] = [];
    await client.watchTasks((inspection: Inspection) => void graphs.push(inspection));
    const first = await client.call("instance");

    // workerd evicts an object that has had nothing to do for about ten seconds; its hibernatable sockets stay
    // open. Wait in silence (any message would keep it in memory), then ask again, until a new instance answers.
    let woken = first;
    for (let round = 0; round < 4 && woken === first; round++) {
      await pause(11_000);
      woken = await client.call("instance");
    }
    expect(woken).not.toBe(first);
    expect(sockets).toBe(1); // no reconnect: the socket outlived the instance

    // The subscription made on the first instance was made again from the socket's attachment.
    const id = await client.createTask("example.counter", { to: 2 });
    await until(() => graphs.some((graph) => graph.tasks.some((task) => task.record.id === id)), "the task in the kept subscription");
    expect((await client.waitForTask(id)).state).toEqual({ status: "terminal", outcome: { status: "completed", result: "counted to 2" } });

    // client.close() on an object's client: the page leaves; the object goes on serving others.
    await client.close();
    await expect(client.call("instance")).rejects.toMatchObject({ name: "WorkerGone" });
    const status = await edge.call("hibernating", "idle", "/rpc", { method: "POST", body: JSON.stringify({ method: "status" }) });
    expect(await status.json()).toMatchObject({ value: { kind: "ready" } });
  }, 90_000);

  it("POST /rpc answers a call with its value, and a bad call with the library's error", async () => {
    const rpc = async (method: string, ...args: unknown[]) =>
      (await edge.call("counter", "http", "/rpc", { method: "POST", body: JSON.stringify({ method, args }) })).json();
    const created = (await rpc("createTask", "example.counter", { to: 1 })) as { value: number };
    expect(typeof created.value).toBe("number");
    expect(((await rpc("waitForTask", created.value)) as { value: { state: unknown } }).value.state).toMatchObject({ status: "terminal" });
    expect(await rpc("query", "SELECT count(*) AS n FROM tasks")).toEqual({ value: [{ n: 1 }] });
    expect(await rpc("noSuchMethod")).toMatchObject({ error: { name: "UnknownMethod" } });
    // The object's life is not a page's to end: close and requestTakeover are not served, and it goes on.
    expect(await rpc("close")).toMatchObject({ error: { name: "MethodNotServed", details: { method: "close" } } });
    expect(await rpc("requestTakeover")).toMatchObject({ error: { name: "MethodNotServed" } });
    expect(await rpc("status")).toMatchObject({ value: { kind: "ready" } });
    const bad = await edge.call("counter", "http", "/rpc", { method: "POST", body: "not json" });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ error: { name: "InvalidRequest" } });
    const failed = (await rpc("waitForTask", 999_999)) as { error: Record<string, unknown> };
    expect(failed.error.name).toBeDefined();
    expect(failed.error).not.toHaveProperty("stack"); // the object's bundle paths stay on the object
  });

  it("npm run start:edge's object: the demo's offline model answers a chat message over the socket", async () => {
    const client = new HarnessClient({ url: "ws://edge/demo/chat", connect: () => objectSocket("chat", "demo") });
    await client.ready();
    const [offline] = (await client.call("models.list")) as Array<{ provider: string; id: string; offline: boolean }>;
    expect(offline!.offline).toBe(true);
    const conversation = await client.rootConversation({ model: `${offline!.provider}/${offline!.id}` });
    const submission = await client.submit(conversation, { type: "input", content: "hello" });
    expect(await client.waitForSubmission(submission)).toMatchObject({ status: "done" });
  });
});
