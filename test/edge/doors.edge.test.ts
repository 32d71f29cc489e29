/**
 * The object's doors in workerd (issue 22 item 2, issue 21 R5): the signed-token recipe of
 * examples/signed-callers.ts — a client without a valid token, or reaching another user's object, can read,
 * write and subscribe to nothing, and changes nothing — and a socket's listeners are bounded.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { signToken } from "../../examples/signed-callers.ts";
import { type Edge, type ObjectKind, pause, startEdge } from "./support.ts";

let edge: Edge;
beforeAll(async () => {
  edge = await startEdge();
}, 120_000);
afterAll(() => edge?.dispose());

const SECRET = "edge-test-secret";

interface RawSocket {
  send(message: object): void;
  close(): void;
  /** Every message the object sent, parsed. */
  readonly received: Array<{ type: string; id: number; value?: unknown; error?: { name: string } }>;
}

/** A raw WebSocket to `path` (the object's answer's status when it did not upgrade). */
async function rawSocket(
  object: ObjectKind,
  name: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<RawSocket | number> {
  const response = await edge.call(object, name, path, { headers: { Upgrade: "websocket", ...headers } });
  const ws = (response as unknown as { webSocket?: any }).webSocket;
  if (!ws) return response.status;
  ws.accept();
  const received: RawSocket["received"] = [];
  ws.addEventListener("message", (event: { data: string }) => void received.push(JSON.parse(event.data)));
  return { send: (message) => ws.send(JSON.stringify(message)), close: () => ws.close(), received };
}

async function until(done: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await done()) return;
    await pause(20);
  }
  throw new Error(`never: ${what}`);
}

const rpc = (object: ObjectKind, name: string, method: string, args: unknown[], headers: Record<string, string> = {}) =>
  edge.call(object, name, "/rpc", { method: "POST", headers, body: JSON.stringify({ method, args }) });

/** Every kind of thing a page does: reads, writes, a power, subscriptions. */
const CALLS: Array<[string, unknown[]]> = [
  ["status", []],
  ["inspect", []],
  ["listConversations", []],
  ["rootConversation", []],
  ["submit", [1, { type: "input", content: "hello" }]],
  ["createTask", ["example.counter", { to: 1 }]],
  ["getTask", [1]],
  ["query", ["SELECT 1"]],
];
const SUBSCRIPTIONS: Array<[string, unknown[]]> = [
  ["onStatus", []],
  ["onReport", []],
  ["watchTasks", []],
  ["watchConversation", [1]],
];

describe("who may call what: a signed token checked in the Worker, the object checking the caller on connect and per call", () => {
  it("its own user, with a valid token, may submit, read, subscribe and create tasks; not a power left off (query)", async () => {
    const token = await signToken(SECRET, "alice");
    const headers = { authorization: `Bearer ${token}` };
    const created = await rpc("signed", "-", "createTask", ["example.counter", { to: 1 }], headers);
    expect(created.status).toBe(200);
    const { value: id } = (await created.json()) as { value: number };
    expect(((await (await rpc("signed", "-", "waitForTask", [id], headers)).json()) as { value: { id: number } }).value.id).toBe(id);
    const query = await rpc("signed", "-", "query", ["SELECT 1"], headers);
    expect(query.status).toBe(403);
    expect(await query.json()).toMatchObject({ error: { name: "NotAuthorized" } });

    const socket = await rawSocket("signed", "-", `/?token=${encodeURIComponent(token)}`);
    if (typeof socket === "number") throw new Error(`no socket: ${socket}`);
    socket.send({ type: "subscribe", id: 1, method: "watchTasks", args: [] });
    await until(() => socket.received.some((message) => message.type === "event" && message.id === 1), "alice's task graph");
    socket.close();
  });

  it("without a valid token nothing gets through: every request is 401 and nothing runs", async () => {
    const forged = `alice.${"A".repeat(43)}`;
    const wrongSecret = await signToken("another secret", "alice");
    for (const headers of [
      {} as Record<string, string>,
      { authorization: `Bearer ${forged}` },
      { authorization: `Bearer ${wrongSecret}` },
      { authorization: "alice" },
    ]) {
      for (const [method, args] of CALLS) {
        const response = await rpc("signed", "-", method, args, headers);
        expect(response.status, `${method} ${JSON.stringify(headers)}`).toBe(401);
      }
      expect(await rawSocket("signed", "-", "/", headers)).toBe(401);
    }
    expect(await rawSocket("signed", "-", `/?token=${encodeURIComponent(forged)}`)).toBe(401);
  });

  it("reaching another user's object (around the Worker, or with a forged caller) is NotAuthorized for every call and subscription, and changes nothing", async () => {
    // alice's object, reached directly by its name: no caller named → 401; mallory named → 403 for everything.
    const target = "alice";
    for (const [method, args] of CALLS) expect((await rpc("users", target, method, args)).status).toBe(401);
    expect(await rawSocket("users", target, "/")).toBe(401);

    const mallory = { "x-pi-durable-caller": "mallory" };
    for (const [method, args] of CALLS) {
      const response = await rpc("users", target, method, args, mallory);
      expect(response.status, method).toBe(403);
      expect(await response.json()).toMatchObject({ error: { name: "NotAuthorized" } });
    }
    const socket = await rawSocket("users", target, "/", mallory);
    if (typeof socket === "number") throw new Error(`no socket: ${socket}`);
    let id = 0;
    for (const [method, args] of CALLS) socket.send({ type: "call", id: ++id, method, args });
    for (const [method, args] of SUBSCRIPTIONS) socket.send({ type: "subscribe", id: ++id, method, args });
    await until(() => socket.received.length >= id, "an answer to every message");
    expect(socket.received.map((message) => [message.type, message.error?.name])).toEqual(
      Array.from({ length: id }, () => ["error", "NotAuthorized"]),
    );
    socket.close();

    // alice's own view: only what alice did in the first test (one task, no submission from mallory).
    const alice = { authorization: `Bearer ${await signToken(SECRET, "alice")}` };
    const inspection = (await (await rpc("signed", "-", "inspect", [], alice)).json()) as { value: { tasks: unknown[] } };
    expect(inspection.value.tasks).toHaveLength(0); // the first test's task is done: nothing live
    const conversations = (await (await rpc("signed", "-", "listConversations", [], alice)).json()) as { value: Array<{ id: number }> };
    expect(conversations.value).toHaveLength(1); // the root that alice's task went to
    const root = conversations.value[0]!.id;
    const entries = await rpc("signed", "-", "conversationEntries", [root, Number.MAX_SAFE_INTEGER, 100], alice);
    expect(await entries.json()).toMatchObject({ value: { entries: [] } }); // mallory's submit never ran
  });
});

describe("R4/R11 on an object: malformed arguments are refused with a typed error, HTTP 400 or a socket answer, before anything runs", () => {
  it("createTask(kind, input, null), configure(id, null), query() without SQL, non-array args, content items pi-ai cannot read", async () => {
    const token = await signToken(SECRET, "bob");
    const headers = { authorization: `Bearer ${token}` };
    const root = ((await (await rpc("signed", "-", "rootConversation", [], headers)).json()) as { value: number }).value;
    const bad = [400, "InvalidArguments"];
    const malformed: Array<[string, unknown, unknown[]]> = [
      ["createTask", ["example.counter", { to: 1 }, null], bad],
      ["configure", [root, null], bad], // checked before the table says configure is a power here
      ["query", [], bad],
      ["submit", [root, { type: "input", content: [5] }], bad],
      ["submit", [root, { type: "input", content: [null] }], bad],
      ["submit", [root, { type: "input", content: [{ type: "bogus" }] }], bad],
      ["submit", [root, { type: "input", content: [{ type: "image" }] }], bad],
      ["getTask", "1", [400, "InvalidRequest"]], // not an argument list: POST /rpc's own check
      ["call", ["constructor"], [403, "NotAuthorized"]], // well formed, but app methods are off here
    ];
    for (const [method, args, expected] of malformed) {
      const response = await edge.call("signed", "-", "/rpc", { method: "POST", headers, body: JSON.stringify({ method, args }) });
      const body = (await response.json()) as { error?: { name: string } };
      expect([response.status, body.error?.name], method).toEqual(expected);
    }
    const socket = await rawSocket("signed", "-", `/?token=${encodeURIComponent(token)}`);
    if (typeof socket === "number") throw new Error(`no socket: ${socket}`);
    socket.send({ type: "call", id: 1, method: "submit", args: [root, { type: "input", content: [5] }] });
    socket.send({ type: "subscribe", id: 2, method: "watchConversation", args: ["1"] });
    await until(() => socket.received.length >= 2, "two answers");
    expect(socket.received.map((message) => message.error?.name)).toEqual(["InvalidArguments", "InvalidArguments"]);
    socket.close();
    const entries = await rpc("signed", "-", "conversationEntries", [root, Number.MAX_SAFE_INTEGER, 100], headers);
    expect(await entries.json()).toMatchObject({ value: { entries: [] } }); // nothing malformed was committed
  });
});

describe("R5: a socket's listeners are bounded", () => {
  const listeners = async (name: string) => ((await edge.json("hibernating", name, "/listeners")) as { listeners: number }).listeners;

  it("a reused subscription id is refused while it is live; none is left after unsubscribe and after the socket closes", async () => {
    const socket = await rawSocket("hibernating", "reuse", "/");
    if (typeof socket === "number") throw new Error(`no socket: ${socket}`);
    const base = await listeners("reuse");
    for (let i = 0; i < 200; i++) socket.send({ type: "subscribe", id: 1, method: "watchTasks", args: [] });
    await until(() => socket.received.filter((message) => message.type !== "event").length >= 200, "200 answers");
    expect(socket.received.filter((message) => message.type === "error").map((message) => message.error?.name)).toEqual(
      Array.from({ length: 199 }, () => "InvalidRequest"),
    );
    expect(await listeners("reuse")).toBe(base + 1);
    socket.send({ type: "unsubscribe", id: 1 });
    await until(async () => (await listeners("reuse")) === base, "the listener gone after unsubscribe");

    for (let id = 2; id < 12; id++) socket.send({ type: "subscribe", id, method: "onStatus", args: [] });
    await until(async () => (await listeners("reuse")) === base + 10, "ten listeners");
    socket.close();
    await until(async () => (await listeners("reuse")) === base, "every listener gone after the socket closed");
  });
});
