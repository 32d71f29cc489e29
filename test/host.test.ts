import { describe, expect, it } from "vitest";
import { counterTask } from "../examples/counter-task.ts";
import { HostClient } from "../src/host/client.ts";
import { type HostEndpoint, hostEndpoint, remoteHost } from "../src/host/endpoint.ts";
import { deserializeError, serializeError } from "../src/host/error-wire.ts";
import { createHost, type HostOptions } from "../src/host/host.ts";
import { type ClientMessage, type HostMessage, messageEndpoint, serveMessages } from "../src/host/messages.ts";
import type { Ownership } from "../src/host/ownership.ts";
import type { HarnessStatus, RemoteHost } from "../src/host/protocol.ts";
import {
  ConversationBusy,
  CrashPointsOff,
  createRegistry,
  DurableError,
  defineExtension,
  InvalidSetting,
  NotFound,
  QueryNotReadOnly,
  SchemaTooNew,
  type Storage,
  UnknownMethod,
  UnknownTaskKind,
  WorkerGone,
} from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { flush, sqliteMemoryBackend } from "./support.ts";

function counterRegistry() {
  return createRegistry().install(defineExtension({ name: "example", tasks: [counterTask(() => {})] }));
}

function serve(options: Partial<HostOptions> = {}, storage?: Storage) {
  return createHost({
    database: "test",
    openStorage: async () => storage ?? (await sqliteMemoryBackend.create()),
    harness: { registry: counterRegistry(), clock: createManualClock(1_000), resume: true },
    now: () => 0,
    ...options,
  });
}

/** A page-side endpoint connected to `served` by messages, as over a WebSocket (structured clone stands in for JSON). */
function pageEndpoint(served: ReturnType<typeof serve>): HostEndpoint {
  let toPage: (message: HostMessage) => void = () => {};
  const connection = serveMessages(hostEndpoint(served.service), (message) => queueMicrotask(() => toPage(structuredClone(message))));
  const page = messageEndpoint((message: ClientMessage) => queueMicrotask(() => connection.receive(structuredClone(message))));
  toPage = page.receive;
  return page.endpoint;
}

/** A page and a host connected by messages, as over a WebSocket (structured clone stands in for JSON). */
function overMessages(served: ReturnType<typeof serve>): { remote: RemoteHost; close(): void } {
  const endpoint = hostEndpoint(served.service);
  let toPage: (message: HostMessage) => void = () => {};
  const connection = serveMessages(endpoint, (message) => queueMicrotask(() => toPage(structuredClone(message))));
  const page = messageEndpoint((message: ClientMessage) => queueMicrotask(() => connection.receive(structuredClone(message))));
  toPage = page.receive;
  return { remote: remoteHost(page.endpoint), close: () => connection.close() };
}

describe("the runtime-neutral host over a message transport", () => {
  it("serves tasks, SQL and statuses: a counter created by the page runs to its end", async () => {
    const served = serve();
    const { remote } = overMessages(served);
    const statuses: string[] = [];
    await remote.onStatus((status) => statuses.push(status.kind));
    await served.ready;
    const id = await remote.createTask("example.counter", { to: 1 });
    const done = await remote.waitForTask(id);
    expect(done.state).toMatchObject({ status: "terminal", outcome: { status: "completed", result: "counted to 1" } });
    expect(await remote.query("SELECT id, status FROM tasks WHERE id = ?", id)).toEqual([{ id, status: "terminal" }]);
    // Subscribed over an asynchronous transport: it sees the status of its time, then every change.
    expect(statuses.length).toBeGreaterThan(0);
    expect(["starting", "opening", "recovering", "ready"].slice(-statuses.length)).toEqual(statuses);
    expect(await remote.call("missing").catch((error: unknown) => error)).toBeInstanceOf(DurableError);
  });

  it("rebuilds the library's error classes on the page, with name, message and fields", async () => {
    const served = serve();
    const { remote } = overMessages(served);
    await served.ready;
    const unknownKind = await remote.createTask("nope", {}).catch((error: unknown) => error);
    expect(unknownKind).toBeInstanceOf(UnknownTaskKind);
    expect(unknownKind).toBeInstanceOf(DurableError);
    expect(unknownKind).toMatchObject({ name: "UnknownTaskKind", kind: "nope" });
    expect((unknownKind as Error).message).toContain("example.counter");
    const write = await remote.query("DELETE FROM tasks").catch((error: unknown) => error);
    expect(write).toBeInstanceOf(QueryNotReadOnly);
    expect(
      await remote.getTask(999).then(
        () => "found",
        (error: unknown) => error,
      ),
    ).not.toBeInstanceOf(Error);
    expect(await remote.waitForSubmission(999).catch((error: unknown) => error)).toBeInstanceOf(NotFound);
  });

  it("an unknown method is an UnknownMethod error, not a crash of the host", async () => {
    const endpoint = hostEndpoint(serve().service);
    await expect(endpoint.call("dropDatabase", [])).rejects.toBeInstanceOf(UnknownMethod);
    await expect(endpoint.call("watchTasks", [])).rejects.toBeInstanceOf(UnknownMethod);
    await expect(endpoint.subscribe("createTask", [], () => {})).rejects.toBeInstanceOf(UnknownMethod);
  });

  it("leaves no listener after 1,000 subscribe/unsubscribe cycles of every subscription", async () => {
    const served = serve();
    const endpoint = hostEndpoint(served.service);
    const { remote } = overMessages(served);
    await served.ready;
    const conversation = await remote.rootConversation();
    const baseline = served.listenerCount();
    for (let cycle = 0; cycle < 1_000; cycle += 1) {
      const stops = await Promise.all([
        remote.onStatus(() => {}),
        remote.onReport(() => {}),
        remote.watchTasks(() => {}),
        remote.watchConversation(conversation, () => {}),
      ]);
      expect(served.listenerCount()).toBe(baseline + 4);
      for (const stop of stops) stop();
      await flush(1);
    }
    expect(served.listenerCount()).toBe(baseline);
    expect(endpoint.subscriptions).toBe(0);
  });

  it("stops pushing to an unsubscribed listener, and a closed connection drops its listeners", async () => {
    const served = serve();
    const { remote, close } = overMessages(served);
    await served.ready;
    const seen: number[] = [];
    const stop = await remote.watchTasks((inspection) => seen.push(inspection.tasks.length));
    await remote.watchTasks(() => {});
    const first = await remote.createTask("example.counter", { to: 1 });
    await remote.waitForTask(first);
    await flush();
    const before = seen.length;
    expect(before).toBeGreaterThan(0);
    stop();
    stop(); // twice is once
    await flush();
    await remote.waitForTask(await remote.createTask("example.counter", { to: 1 }));
    await flush();
    expect(seen.length).toBe(before);
    const baseline = served.listenerCount();
    close();
    await flush();
    expect(served.listenerCount()).toBe(baseline - 1);
  });

  it("a refused subscription rejects and holds nothing (watchConversation before the database is open: it waits for the open, as a call does since 0138 and a watch since 0144, and is refused once a close ends that wait)", async () => {
    const served = serve({ openStorage: () => new Promise<never>(() => {}) });
    const { remote } = overMessages(served);
    const watched = remote.watchConversation(1, () => {});
    let settled = false;
    watched.then(
      () => (settled = true),
      () => (settled = true),
    );
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setTimeout(resolve, 0));
    expect(settled).toBe(false);
    void served.service.close().catch(() => {});
    await expect(watched).rejects.toThrow(/not open/);
    expect(served.listenerCount()).toBe(0);
  });
});

describe("crash points and ownership", () => {
  it("armCrashPoint resolves when the point is reached; crashPoints: false refuses with CrashPointsOff", async () => {
    const served = serve();
    await served.ready;
    const hit = served.service.armCrashPoint("counter:after-tick-1");
    const id = await served.service.createTask("example.counter", { to: 1 });
    expect(await hit).toMatchObject({ name: "counter:after-tick-1", taskId: id, taskKind: "example.counter" });
    await served.service.close(); // ends the stopped phase

    const off = serve({ crashPoints: false });
    await off.ready;
    const refused = await off.service.armCrashPoint("counter:after-tick-1").catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(CrashPointsOff);
    expect(refused).toMatchObject({ crashPoint: "counter:after-tick-1" });
  });

  it("waits for the owner, opens once it lets go, closes on a takeover request and queues for the database again", async () => {
    let grant!: () => void;
    let takeover!: () => void;
    let released = 0;
    const ownership: Ownership = {
      acquire: (waiting) => {
        waiting();
        return new Promise((resolve) => (grant = () => resolve(() => void (released += 1))));
      },
      cancel: () => {},
      requestTakeover: () => {},
      onTakeoverRequest: (handler) => (takeover = handler),
      lifeLock: async () => undefined,
    };
    const served = serve({ ownership });
    const statuses: HarnessStatus["kind"][] = [];
    served.service.onStatus((status) => statuses.push(status.kind));
    await flush();
    expect(served.service.status().kind).toBe("waiting-for-lock");
    grant();
    await served.ready;
    takeover();
    await flush();
    expect(statuses).toEqual(["waiting-for-lock", "opening", "recovering", "ready", "closed", "waiting-for-lock"]);
    expect(released).toBe(1);
    // The tab that took over lets go in turn: this one opens again (its page was a follower meanwhile).
    grant();
    await expect.poll(() => served.service.status().kind).toBe("ready");
    await served.service.close();
    expect(served.service.status()).toEqual({ kind: "closed", reason: "close" });
    expect(statuses.slice(6)).toEqual(["opening", "recovering", "ready", "closed"]);
    expect(released).toBe(2);
  });
});

describe("error serialization", () => {
  it("keeps class, name, message and fields of the library's errors; others stay plain errors", () => {
    const busy = deserializeError(serializeError(new ConversationBusy(7)));
    expect(busy).toBeInstanceOf(ConversationBusy);
    expect(busy).toBeInstanceOf(Error);
    expect(busy).toMatchObject({ name: "ConversationBusy", conversationId: 7 });
    expect(busy.message).toBe(new ConversationBusy(7).message);
    const type = deserializeError(serializeError(new TypeError("bad")));
    expect(type).toBeInstanceOf(TypeError);
    const custom = Object.assign(new Error("app"), { name: "AppError" });
    const rebuilt = deserializeError(serializeError(custom));
    expect(rebuilt).toMatchObject({ name: "AppError", message: "app" });
    expect(rebuilt).not.toBeInstanceOf(DurableError);
    expect(serializeError("text")).toEqual({ name: "Error", message: "text" });
  });
});

describe("the page's client over any transport", () => {
  /** A transport that can tell the host is gone (a closed socket, a dead worker). */
  class TestClient extends HostClient {
    lose(message: string) {
      this.gone(message);
    }
  }

  it("keeps the last status, and ready() rejects with the library's class of a failed open", async () => {
    const client = new TestClient(pageEndpoint(serve()));
    await client.ready();
    expect(client.status.kind).toBe("ready");
    const failing = new TestClient(pageEndpoint(serve({ harness: { registry: counterRegistry(), settings: { restartLimit: -1 } } })));
    const error = await failing.ready().catch((error: unknown) => error);
    expect(error).toBeInstanceOf(InvalidSetting);
    expect(failing.status).toMatchObject({ kind: "failed", error: { name: "InvalidSetting" } });
    // The class's fields travel with the failed status.
    const tooNew = new TestClient(pageEndpoint(serve({ openStorage: () => Promise.reject(new SchemaTooNew(99, 3)) })));
    const refused = await tooNew.ready().catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(SchemaTooNew);
    expect(refused).toMatchObject({ found: 99, supported: 3, message: new SchemaTooNew(99, 3).message });
    expect(tooNew.status).toEqual({
      kind: "failed",
      error: { name: "SchemaTooNew", message: new SchemaTooNew(99, 3).message, details: { found: 99, supported: 3 } },
    });
  });

  it("once the transport says the host is gone, pending and later calls reject with WorkerGone", async () => {
    const client = new TestClient(pageEndpoint(serve({ openStorage: () => new Promise<never>(() => {}) })));
    const pending = client.ready();
    const call = client.inspect();
    client.lose("The socket closed.");
    await expect(pending).rejects.toBeInstanceOf(WorkerGone);
    await expect(call).rejects.toThrow("The socket closed.");
    await expect(client.query("SELECT 1")).rejects.toBeInstanceOf(WorkerGone);
    expect(client.status).toMatchObject({ kind: "failed", error: { name: "WorkerGone" } });
  });
});
