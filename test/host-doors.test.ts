/**
 * The host's doors, read from each method's row in PROTOCOL: arguments checked before anything runs (issue 21
 * R4, R11), names looked up as own properties only (R6), and the policy the tabs and the client read.
 */
import { describe, expect, it } from "vitest";
import { retried, withKey } from "../src/browser/tabs/retry.ts";
import { hostEndpoint } from "../src/host/endpoint.ts";
import { type HostMessage, serveMessages } from "../src/host/messages.ts";
import { ALL_POWERS, PROTOCOL } from "../src/host/protocol.ts";
import { DurableError, InvalidArguments, InvalidSubmission, UnknownAppMethod, UnknownMethod } from "../src/index.ts";
import { answer, ScriptedModels } from "./agent-support.ts";
import { served } from "./doors-support.ts";
import { ctx, flush } from "./support.ts";

const BAD_CONTENT: unknown[] = [[5], [null], [{ type: "bogus" }], [{ type: "image" }], [{ type: "text" }], [], ""];

describe("arguments are checked at the host before anything runs", () => {
  it("R4: an input with content items pi-ai cannot read is refused at the host and by the agent, and nothing is committed", async () => {
    const { endpoint, harness, root, image, models } = await served(new ScriptedModels([answer("still here")]));
    const before = await image();
    for (const content of BAD_CONTENT) {
      await expect(endpoint.call("submit", [root, { type: "input", content }])).rejects.toBeInstanceOf(InvalidArguments);
      // A direct API caller, past the host: the agent refuses it too.
      await expect(harness.conversation(root).submit({ type: "input", content } as never, ctx)).rejects.toBeInstanceOf(InvalidSubmission);
    }
    expect(await image()).toBe(before);
    // The conversation still answers.
    const id = (await endpoint.call("submit", [root, { type: "input", content: [{ type: "text", text: "hi" }] }])) as number;
    expect(await endpoint.call("waitForSubmission", [id])).toMatchObject({ status: "done", answer: { text: "still here" } });
    expect(models.requests).toHaveLength(1);
  });

  it("R11: wrong argument types are InvalidArguments (typed, with the method and the argument), never a TypeError", async () => {
    const { endpoint, root, image } = await served();
    const before = await image();
    const refused: Array<[string, unknown]> = [
      ["createTask", ["example.counter", { to: 1 }, null]],
      ["createTask", ["example.counter", { to: 1 }, { key: 5 }]],
      ["createTask", ["example.counter", { to: 1 }, { conversationId: "1" }]],
      ["createTask", ["example.counter", { to: () => 1 }]],
      ["createTask", [7, {}]],
      ["configure", [root, null]],
      ["configure", [root, { model: 5 }]],
      ["configure", [root, { tools: "all" }]],
      ["query", []],
      ["query", ["SELECT 1", { not: "a scalar" }]],
      ["getTask", "1"],
      ["getTask", { length: 1, 0: 1 }],
      ["getTask", [1.5]],
      ["getTask", [1, 2]],
      ["conversationEntries", [root, 1, 1_000_000]],
      ["submit", [root, { type: "input", content: "x", whenBusy: "later" }]],
      ["submit", [root, { type: "write", entry: {} }]],
      ["submit", [root, { type: "input", content: "x", extra: true }]],
      ["call", []],
      ["call", ["echo", 10n]],
    ];
    for (const [method, args] of refused) {
      const error = await endpoint.call(method, args as unknown[]).catch((caught: unknown) => caught);
      expect(error, `${method} ${String(args)}`).toBeInstanceOf(InvalidArguments);
      expect((error as InvalidArguments).method).toBe(method);
    }
    expect(await image()).toBe(before);
  });

  it("R4 (review2): a written entry the agent's context cannot read, or one of the agent's own kinds, is refused; the conversation still answers", async () => {
    const { endpoint, harness, root, image, models } = await served(new ScriptedModels([answer("still here")]));
    const before = await image();
    const forged: unknown[] = [
      { kind: "note", message: { role: "assistant" } },
      { kind: "note", message: { role: "assistant", content: [{ type: "toolCall" }] } },
      { kind: "note", message: { role: "user", content: [5] } },
      { kind: "note", message: { role: "toolResult", content: "x" } },
      { kind: "note", message: { role: "system", content: 7 } },
      { kind: "pi.compaction", data: {} },
      { kind: "pi.compaction" },
      { kind: "pi.user", message: { role: "user", content: "x" } },
    ];
    for (const entry of forged) {
      await expect(endpoint.call("submit", [root, { type: "write", entry }]), JSON.stringify(entry)).rejects.toBeInstanceOf(
        InvalidArguments,
      );
      await expect(harness.conversation(root).submit({ type: "write", entry } as never, ctx)).rejects.toBeInstanceOf(InvalidSubmission);
    }
    expect(await image()).toBe(before);
    // An app's own entry, with or without a readable message, is still written.
    for (const entry of [
      { kind: "app.note", data: { x: 1 } },
      { kind: "app.note", message: { role: "user", content: "noted", timestamp: 1 } },
    ]) {
      const written = (await endpoint.call("submit", [root, { type: "write", entry }])) as number;
      expect(await endpoint.call("waitForSubmission", [written])).toMatchObject({ status: "done" });
    }
    const id = (await endpoint.call("submit", [root, { type: "input", content: "hi" }])) as number;
    expect(await endpoint.call("waitForSubmission", [id])).toMatchObject({ status: "done", answer: { text: "still here" } });
    expect(models.requests).toHaveLength(1);
  });

  it("a JSON value nested deeper than the bound is refused, without a RangeError", async () => {
    const { endpoint } = await served();
    let deep: unknown = 1;
    for (let level = 0; level < 20_000; level++) deep = [deep];
    // Past what any harness accepts (settings.limits.maxDepth is at most 512): the limit's error (decision 0022).
    await expect(endpoint.call("createTask", ["example.counter", deep])).rejects.toMatchObject({ name: "InvalidInput", limit: "maxDepth" });
    await expect(endpoint.call("call", ["echo", deep])).rejects.toMatchObject({ name: "InvalidInput", limit: "maxDepth" });
  });

  it("well-formed calls still run: optional arguments absent or undefined, an own app method", async () => {
    const { endpoint, root } = await served();
    const id = (await endpoint.call("createTask", ["example.counter", { to: 1 }, undefined])) as number;
    expect(await endpoint.call("getTask", [id])).toMatchObject({ id });
    expect(await endpoint.call("compact", [root])).toEqual(expect.any(Number));
    expect(await endpoint.call("call", ["echo", { a: [1, "b", null] }])).toEqual({ a: [1, "b", null] });
  });
});

describe("R6: names are looked up as own properties only", () => {
  const names = ["constructor", "toString", "valueOf", "hasOwnProperty", "__proto__", "__defineGetter__", "isPrototypeOf"];

  it("a protocol method that is a prototype member is UnknownMethod", async () => {
    const { endpoint } = await served();
    for (const name of names) {
      await expect(endpoint.call(name, [])).rejects.toBeInstanceOf(UnknownMethod);
      await expect(endpoint.subscribe(name, [], () => {})).rejects.toBeInstanceOf(UnknownMethod);
    }
  });

  it("an app method that is a prototype member is UnknownAppMethod, never the harness", async () => {
    const { endpoint, service } = await served();
    for (const name of names) {
      const error = await endpoint.call("call", [name]).catch((caught: unknown) => caught);
      expect(error, name).toBeInstanceOf(UnknownAppMethod);
      await expect(service.call(name)).rejects.toBeInstanceOf(UnknownAppMethod);
    }
    await expect(endpoint.call("call", ["missing"])).rejects.toBeInstanceOf(DurableError);
  });
});

describe("each method's policy is its row in PROTOCOL", () => {
  it("a follower's key goes where the row says, and only safe or keyed calls are sent again", () => {
    const task = withKey("createTask", ["example.counter", { to: 1 }]);
    expect(task[2]).toEqual({ key: expect.stringMatching(/^pi\.handover:/) });
    expect(withKey("createTask", ["example.counter", 1, { key: "mine" }])[2]).toEqual({ key: "mine" });
    const submission = withKey("submit", [1, { type: "input", content: "x" }]);
    expect(submission[1]).toEqual({ type: "input", content: "x", requestId: expect.stringMatching(/^pi\.handover:/) });
    expect(retried("createTask", ["k", 1])).toBe(false);
    expect(retried("createTask", task)).toBe(true);
    expect(retried("getTask", [1])).toBe(true);
    expect(retried("createConversation", [])).toBe(false);
    expect(retried("constructor", [])).toBe(false);
  });

  it("every power is listed by ALL_POWERS, and every page call is one a page needs for its conversations", () => {
    expect(ALL_POWERS).toEqual(
      expect.arrayContaining(["createTask", "configure", "query", "exportDatabase", "armCrashPoint", "call", "rootConversation"]),
    );
    expect(ALL_POWERS).not.toContain("submit");
    for (const [name, row] of Object.entries(PROTOCOL)) {
      expect(row.retry === "keyed", name).toBe(row.key !== undefined);
      expect(row.args([..."x".repeat(50)].map(() => ({}))), name).toEqual(expect.any(String));
    }
  });
});

describe("R5: a subscription id names one listener", () => {
  it("1,000 subscribes under one id hold one listener; none is left after unsubscribe, or after close", async () => {
    const { service, listenerCount, root } = await served();
    const base = listenerCount();
    const subscriptions: Array<[string, unknown[]]> = [
      ["onStatus", []],
      ["watchTasks", []],
      ["watchConversation", [root]],
      ["onReport", []],
    ];
    for (const end of ["unsubscribe", "close"] as const) {
      for (const [method, args] of subscriptions) {
        const sent: HostMessage[] = [];
        const connection = serveMessages(hostEndpoint(service), (message) => void sent.push(message));
        for (let i = 0; i < 1000; i++) connection.receive({ type: "subscribe", id: 7, method, args });
        await flush(20);
        expect(listenerCount(), method).toBe(base + 1);
        expect(sent.filter((message) => message.type === "error")).toHaveLength(999);
        expect(sent.find((message) => message.type === "error")).toMatchObject({ error: { name: "InvalidRequest" } });
        if (end === "unsubscribe") connection.receive({ type: "unsubscribe", id: 7 });
        connection.close();
        await flush(20);
        expect(listenerCount(), `${method} after ${end}`).toBe(base);
        // A message that arrives after the close holds nothing.
        connection.receive({ type: "subscribe", id: 8, method, args });
        await flush(20);
        expect(listenerCount(), method).toBe(base);
      }
    }
  });
});
