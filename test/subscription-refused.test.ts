/**
 * Decision 0114: a subscription the host answered once and refuses when the transport asks it again — a reconnect of
 * connectHarness(url)'s socket (src/browser/socket.ts), or the database moving under a worker's page (the tabs'
 * endpoint, src/browser/tabs/follower.ts: a reopen, a rebuild, another tab leading) — has ended: it is removed, asked
 * nowhere again, and its owner is told the host's typed error once (`lost`; a `ConversationView`'s `lost`/`onLost`).
 * Before, it stayed in the endpoint's map, was asked again at every reconnect, and its owner heard nothing.
 */
import { describe, expect, it } from "vitest";
import type { PendingPageCall } from "../src/agent/tasks/page-calls.ts";
import type { ConversationViewState } from "../src/agent/view/view.ts";
import { socketEndpoint } from "../src/browser/socket.ts";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { ConnectionLost, HarnessClosed, NotAuthorized, NotFound, StorageUnavailable } from "../src/errors.ts";
import { HostClient } from "../src/host/client.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { type ClientMessage, messageEndpoint, serveMessages } from "../src/host/messages.ts";
import { providePageTools } from "../src/host/page-tools.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { snapshot } from "./react-fake-client.ts";
import { scriptedSockets, settle } from "./socket-support.ts";

const READY = {
  kind: "ready",
  database: "db",
  recovered: [],
  recovery: { stop: "close", interrupted: [] },
  openMs: 1,
} as never as HarnessStatus;

/**
 * A host that answers every subscription at once (a status, a view's snapshot, a task graph) and refuses the ones
 * `refuse(key)` named (`watchConversation:7`, `watchTasks`) from then on; `asked` lists every subscribe it was asked.
 */
function refusingHost() {
  const refused = new Map<string, Error>();
  const listeners = new Map<number, { key: string; emit: (value: unknown) => void }>();
  const asked: string[] = [];
  let ids = 0;
  let status = READY;
  const endpoint: HostEndpoint = {
    call: async (method) => (method === "lifeLock" ? undefined : null),
    subscribe: async (method, args, emit) => {
      const key = method === "watchConversation" ? `${method}:${JSON.stringify(args[0])}` : method;
      asked.push(key);
      const refusal = refused.get(key);
      if (refusal) throw refusal;
      const id = ++ids;
      listeners.set(id, { key, emit });
      queueMicrotask(() => {
        if (method === "onStatus") emit(status);
        else if (method === "watchConversation") emit(snapshot(args[0] as number));
        else if (method === "watchTasks") emit({ tasks: [] });
      });
      return id;
    },
    unsubscribe: (id) => void listeners.delete(id),
  };
  return {
    endpoint,
    asked,
    refuse: (key: string, error: Error) => void refused.set(key, error),
    allow: (key: string) => void refused.delete(key),
    /** Sends `value` to every listener of `key`. */
    push: (key: string, value: unknown) => {
      for (const listener of listeners.values()) if (listener.key === key) listener.emit(value);
    },
    /** Tells every status listener `next` (the page's tabs' endpoint moves its subscriptions as the database moves). */
    setStatus: (next: HarnessStatus) => {
      status = next;
      for (const listener of listeners.values()) if (listener.key === "onStatus") listener.emit(next);
    },
    held: (key: string) => [...listeners.values()].filter((listener) => listener.key === key).length,
  };
}

describe("a subscription the host refuses when it is asked again ends, and its owner is told (decision 0114)", () => {
  it("0114: over a reconnecting socket, the re-subscribe the host refuses on the second connection is told to its owner once with the host's typed error, is not asked on the third, and the others on the socket keep working (before: kept, asked at every reconnect, never told)", async () => {
    const host = refusingHost();
    const sockets = scriptedSockets(host.endpoint);
    const endpoint = socketEndpoint(sockets.connect, { retryMs: 0 });
    const lost: Record<string, Error[]> = { seven: [], eight: [], tasks: [] };
    const heard: Record<string, unknown[]> = { seven: [], eight: [], tasks: [] };
    const subscribe = (name: string, method: string, args: unknown[]) =>
      endpoint.subscribe(
        method,
        args,
        (value) => heard[name]!.push(value),
        (error) => lost[name]!.push(error),
      );
    await Promise.all([
      subscribe("seven", "watchConversation", [7]),
      subscribe("eight", "watchConversation", [8]),
      subscribe("tasks", "watchTasks", []),
    ]);
    await settle();
    host.refuse("watchConversation:7", new NotFound("Conversation 7 does not exist."));
    host.asked.length = 0;
    sockets.drop(); // the second connection asks all three again; the host refuses 7
    await settle();
    expect(host.asked.sort()).toEqual(["watchConversation:7", "watchConversation:8", "watchTasks"]);
    expect(lost.seven).toHaveLength(1);
    expect(lost.seven![0]).toBeInstanceOf(NotFound);
    expect(lost.seven![0]!.message).toBe("Conversation 7 does not exist.");
    expect(lost.eight).toEqual([]);
    expect(lost.tasks).toEqual([]);
    const before = heard.seven!.length;
    host.push("watchConversation:8", "on the second connection");
    host.push("watchTasks", "tasks on the second connection");
    await settle();
    expect(heard.eight!.at(-1)).toBe("on the second connection");
    expect(heard.tasks!.at(-1)).toBe("tasks on the second connection");
    host.asked.length = 0;
    sockets.drop(); // the third connection: 7 is asked nowhere again
    await settle();
    expect(host.asked.sort()).toEqual(["watchConversation:8", "watchTasks"]);
    expect(lost.seven).toHaveLength(1);
    expect(heard.seven).toHaveLength(before);
    expect(host.held("watchConversation:8")).toBe(1);
    endpoint.close();
  });

  it("0114 after review: over a reconnecting socket, a re-subscribe answered with what passes by itself (HarnessClosed: the object handing over; ConnectionLost from the host; StorageUnavailable) is no refusal — nobody is told `lost`, the next connection asks it again and its owner hears values again (before: ended for good at the first such answer)", async () => {
    const host = refusingHost();
    const sockets = scriptedSockets(host.endpoint);
    const endpoint = socketEndpoint(sockets.connect, { retryMs: 0 });
    const lost: Error[] = [];
    const heard: Record<string, unknown[]> = { seven: [], eight: [], tasks: [] };
    const subscribe = (name: string, method: string, args: unknown[]) =>
      endpoint.subscribe(
        method,
        args,
        (value) => heard[name]!.push(value),
        (error) => lost.push(error),
      );
    await Promise.all([
      subscribe("seven", "watchConversation", [7]),
      subscribe("eight", "watchConversation", [8]),
      subscribe("tasks", "watchTasks", []),
    ]);
    await settle();
    host.refuse("watchConversation:7", new HarnessClosed());
    host.refuse("watchConversation:8", new ConnectionLost());
    host.refuse("watchTasks", new StorageUnavailable("the object's storage is busy"));
    sockets.drop(); // the second connection: all three answered with what passes
    await settle();
    expect(lost).toEqual([]);
    host.allow("watchConversation:7");
    host.allow("watchConversation:8");
    host.allow("watchTasks");
    host.asked.length = 0;
    sockets.drop(); // the third connection asks all three again
    await settle();
    expect(host.asked.sort()).toEqual(["watchConversation:7", "watchConversation:8", "watchTasks"]);
    host.push("watchConversation:7", "seven again");
    host.push("watchConversation:8", "eight again");
    host.push("watchTasks", "tasks again");
    await settle();
    expect([heard.seven!.at(-1), heard.eight!.at(-1), heard.tasks!.at(-1)]).toEqual(["seven again", "eight again", "tasks again"]);
    expect(lost).toEqual([]);
    endpoint.close();
  });

  it("0114 after review: a subscription given an explicit `undefined` for its optional `lost` (`client.watchConversationUpdates(id, listener)`, `client.watchTasks(listener, undefined)`) still hears its values, and the host is asked with the protocol's arguments only (before: the listener was taken for `lost`'s place — undefined — and the function was sent as an argument)", async () => {
    const host = refusingHost();
    const asked: unknown[][] = [];
    const endpoint: HostEndpoint = {
      ...host.endpoint,
      subscribe: (method, args, emit, lost) => {
        asked.push([method, ...args]);
        return host.endpoint.subscribe(method, args, emit, lost);
      },
    };
    const client = new HostClient(endpoint, "page-1");
    const updates: unknown[] = [];
    const tasks: unknown[] = [];
    await client.watchConversationUpdates(7, (update) => updates.push(update));
    await client.watchTasks((inspection) => tasks.push(inspection), undefined);
    await settle();
    expect(asked.filter(([method]) => method !== "onStatus")).toEqual([["watchConversation", 7], ["watchTasks"]]);
    expect(updates).toEqual([snapshot(7)]);
    expect(tasks).toEqual([{ tasks: [] }]);
  });

  it("0114: through HostClient over the socket, an open conversation view ends lost with the refusal (`view.lost`, `onLost` once), a watch and a task subscription are told through their `lost`, and a view of another conversation keeps updating (before: nobody was told)", async () => {
    const host = refusingHost();
    const sockets = scriptedSockets(host.endpoint);
    const client = new HostClient(socketEndpoint(sockets.connect, { retryMs: 0 }), "page-1");
    const view = await client.openConversation(7);
    const other = await client.openConversation(8);
    const lostView: Error[] = [];
    view.onLost((error) => lostView.push(error));
    const watched: Error[] = [];
    await client.watchConversation(
      9,
      () => {},
      (error) => watched.push(error),
    );
    const tasksLost: Error[] = [];
    await client.watchTasks(
      () => {},
      (error) => tasksLost.push(error),
    );
    await settle();
    host.refuse("watchConversation:7", new NotFound("Conversation 7 does not exist."));
    host.refuse("watchConversation:9", new NotAuthorized("watchConversation", "this page may no longer watch conversation 9."));
    host.refuse("watchTasks", new NotAuthorized("watchTasks", "this page may no longer watch the tasks."));
    sockets.drop();
    await settle();
    expect(view.lost).toBeInstanceOf(NotFound);
    expect(lostView).toEqual([view.lost]);
    expect(watched).toHaveLength(1);
    expect(watched[0]).toBeInstanceOf(NotAuthorized);
    expect(tasksLost).toHaveLength(1);
    expect(tasksLost[0]).toBeInstanceOf(NotAuthorized);
    expect(other.lost).toBeUndefined();
    const states: ConversationViewState[] = [];
    other.subscribe((state) => states.push(state));
    host.push("watchConversation:8", snapshot(8, [{ id: 1, text: "still here" }]));
    await settle();
    expect(states.at(-1)?.entries.map((entry) => entry.id)).toEqual([1]);
    expect(client.status.kind).toBe("ready");
    // A late listener hears of it at once; close() after the loss does nothing more.
    const late: Error[] = [];
    view.onLost((error) => late.push(error));
    expect(late).toEqual([view.lost]);
    view.close();
    sockets.drop();
    await settle();
    expect(lostView).toHaveLength(1);
    expect(host.held("watchConversation:7")).toBe(0);
  });

  it("0114: a worker's page (the tabs' endpoint over comlink): when the database reopens (a rebuild, a take-back) and the view's conversation is not in what it opened, the view ends lost with NotFound and the next reopen does not ask it; another view keeps updating (before: it stayed empty, asked again at every move)", async () => {
    const host = refusingHost();
    const client = new HostClient(tabsEndpoint(host.endpoint), "page-1");
    await client.ready();
    const view = await client.openConversation(7);
    const other = await client.openConversation(8);
    const lost: Error[] = [];
    view.onLost((error) => lost.push(error));
    host.refuse("watchConversation:7", new NotFound("Conversation 7 does not exist."));
    host.asked.length = 0;
    host.setStatus({ kind: "recovering", database: "db" }); // the worker's host reopens
    host.setStatus(READY);
    await settle();
    expect(host.asked.filter((key) => key.startsWith("watchConversation")).sort()).toEqual(["watchConversation:7", "watchConversation:8"]);
    expect(lost).toHaveLength(1);
    expect(lost[0]).toBeInstanceOf(NotFound);
    expect(other.lost).toBeUndefined();
    host.asked.length = 0;
    host.setStatus({ kind: "recovering", database: "db" });
    host.setStatus(READY);
    await settle();
    expect(host.asked.filter((key) => key.startsWith("watchConversation"))).toEqual(["watchConversation:8"]);
    expect(lost).toHaveLength(1);
    const states: ConversationViewState[] = [];
    other.subscribe((state) => states.push(state));
    host.push("watchConversation:8", snapshot(8, [{ id: 2, text: "moved" }]));
    await settle();
    expect(states.at(-1)?.entries.map((entry) => entry.id)).toEqual([2]);
  });

  it("0114: a worker's page: the database leaving this tab's worker as the view moves (HarnessClosed, a takeover) is no refusal — the view is kept and moves with the next change", async () => {
    const host = refusingHost();
    const client = new HostClient(tabsEndpoint(host.endpoint), "page-1");
    await client.ready();
    const view = await client.openConversation(7);
    host.refuse("watchConversation:7", new HarnessClosed());
    host.setStatus({ kind: "recovering", database: "db" });
    host.setStatus(READY);
    await settle();
    expect(view.lost).toBeUndefined();
    host.allow("watchConversation:7");
    host.setStatus({ kind: "recovering", database: "db" });
    host.setStatus(READY);
    await settle();
    const states: ConversationViewState[] = [];
    view.subscribe((state) => states.push(state));
    host.push("watchConversation:7", snapshot(7, [{ id: 3, text: "back" }]));
    await settle();
    expect(states.at(-1)?.entries.map((entry) => entry.id)).toEqual([3]);
    expect(view.lost).toBeUndefined();
  });

  it("0114: the client's own status subscription refused at a reconnect: its status says failed with the host's error, and ready() rejects with it", async () => {
    const host = refusingHost();
    const sockets = scriptedSockets(host.endpoint);
    const client = new HostClient(socketEndpoint(sockets.connect, { retryMs: 0 }), "page-1");
    await client.ready();
    host.refuse("onStatus", new NotAuthorized("onStatus", "this page may no longer watch the status."));
    sockets.drop();
    await settle();
    expect(client.status).toMatchObject({ kind: "failed", error: { name: "NotAuthorized" } });
    await expect(client.ready()).rejects.toMatchObject({ name: "NotAuthorized" });
  });

  it("0114: a Durable Object that wakes from hibernation and refuses a restored subscription answers its id with an error frame: the page's view ends lost with that error, and the page's other subscriptions stay (before: the frame was dropped, the view stayed silent)", async () => {
    const first = refusingHost();
    const woken = refusingHost();
    woken.refuse("watchConversation:7", new NotFound("Conversation 7 does not exist."));
    const frames: ClientMessage[] = [];
    const page = messageEndpoint((message) => void frames.push(message));
    const client = new HostClient(page.endpoint, "page-1");
    const connection = serveMessages(first.endpoint, (message) => queueMicrotask(() => page.receive(message)));
    const subscribed: ClientMessage[] = [];
    const deliver = async () => {
      for (const frame of frames.splice(0)) {
        if (frame.type === "subscribe") subscribed.push(frame);
        connection.receive(frame);
      }
      await settle();
    };
    const opening = client.openConversation(7);
    await deliver();
    await deliver();
    const view = await opening;
    expect(subscribed.map((frame) => frame.type === "subscribe" && frame.method)).toEqual(["onStatus", "watchConversation"]);
    // The object is evicted; the instance that wakes restores the page's subscriptions from the socket's attachment.
    const restored = serveMessages(woken.endpoint, (message) => queueMicrotask(() => page.receive(message)));
    restored.restore(
      subscribed
        .map((frame) => frame.type === "subscribe" && { id: frame.id, method: frame.method, args: frame.args })
        .filter((held) => held !== false),
    );
    await settle();
    expect(view.lost).toBeInstanceOf(NotFound);
    expect(view.lost?.message).toBe("Conversation 7 does not exist.");
    expect(client.status.kind).toBe("ready");
    expect(woken.held("onStatus")).toBe(1);
  });

  it("0114: a view lost before its snapshot arrived fails its open with the host's error", async () => {
    let lose!: (error: Error) => void;
    const endpoint: HostEndpoint = {
      call: async () => undefined,
      subscribe: async (method, _args, _emit, lost) => {
        if (method === "watchConversation") lose = lost!;
        return 1;
      },
      unsubscribe: () => {},
    };
    const opening = new HostClient(endpoint, "page-1").openConversation(7);
    await settle();
    lose(new NotFound("Conversation 7 does not exist."));
    await expect(opening).rejects.toBeInstanceOf(NotFound);
  });
});

describe("page tools whose watch is lost (decision 0114)", () => {
  it("0114: providePageTools tells onLost once with the host's error and aborts the run under way; the tools are no longer provided (before: they silently stopped)", async () => {
    let lose!: (error: Error) => void;
    let list!: (calls: PendingPageCall[]) => void;
    const signals: AbortSignal[] = [];
    const host = {
      watchPageCalls: async (_id: number, _page: unknown, listener: (calls: PendingPageCall[]) => void, lost?: (error: Error) => void) => {
        list = listener;
        lose = lost!;
        return () => {};
      },
      claimPageCall: async () => ({ attempt: 1, arguments: {} }),
      answerPageCall: async () => ({}),
    } as never as Parameters<typeof providePageTools>[0];
    const lost: Error[] = [];
    await providePageTools(
      host,
      "page-1",
      3,
      { ask: (_args, call) => new Promise(() => void signals.push(call.signal)) },
      { onLost: (error) => lost.push(error) },
    );
    list([{ callId: "c1", toolName: "ask", status: "waiting", attempts: 0 } as never as PendingPageCall]);
    await settle();
    expect(signals).toHaveLength(1);
    lose(new NotAuthorized("watchPageCalls", "this page may no longer provide tools here."));
    lose(new NotAuthorized("watchPageCalls", "twice"));
    expect(lost).toHaveLength(1);
    expect(lost[0]).toBeInstanceOf(NotAuthorized);
    expect(signals[0]!.aborted).toBe(true);
    list([{ callId: "c2", toolName: "ask", status: "waiting", attempts: 0 } as never as PendingPageCall]);
    await settle();
    expect(signals).toHaveLength(1); // nothing more is run
  });
});
