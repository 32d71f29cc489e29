import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HarnessClient } from "../../src/browser/client.ts";
import type { PendingApproval } from "../../src/index.ts";
import { EXPIRES_AFTER_MS } from "./approval-object.ts";
import { type Edge, edgeSocket, pause, startEdge } from "./support.ts";

/**
 * A call that waits for a person on a Durable Object (DESIGN §4c, issue 23 item 6): the wait outlives the
 * object — an abort (`ctx.abort()`), a cold restart of workerd, a hibernation with the page still connected —
 * with no alarm set while nothing but the person can end it, and the decision arrives over the socket after.
 */
let edge: Edge;
beforeAll(async () => {
  edge = await startEdge();
}, 120_000);
afterAll(() => edge?.dispose());

type Json = any;
const lines = (...names: string[]) =>
  edge.printed.lines.flatMap((line) => names.filter((name) => line.startsWith(`${name}: `)).map((name) => line.slice(name.length + 2)));
const state = (name: string): Promise<Json> => edge.json("approval", name, "/state");

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string, rounds = 250): Promise<T> {
  let value = await read();
  for (let i = 0; i < rounds && !done(value); i++) {
    await pause(20);
    value = await read();
  }
  if (!done(value)) throw new Error(`never: ${what}; last ${JSON.stringify(value)}`);
  return value;
}

/** A page's client on the object `name`, counting the sockets it opened. */
function page(name: string) {
  const opened = { sockets: 0 };
  const client = new HarnessClient({
    url: `ws://edge/approval/${name}`,
    connect: () => {
      opened.sockets += 1;
      return edgeSocket(edge, "approval", name);
    },
  });
  return { client, opened };
}

/** Asks for the write; resolves once it waits for a person. */
async function asked(client: HarnessClient) {
  await client.ready();
  const conversation = await client.rootConversation({ model: "faux/faux-1" });
  const submission = await client.submit(conversation, { type: "input", content: "write a.txt" });
  const [pending] = await until(
    () => client.pendingApprovals(conversation),
    (list) => list.length === 1,
    "the call waits for a person",
  );
  return { conversation, submission, pending: pending! };
}

const answers = (entries: Json[]) =>
  entries
    .filter((entry) => entry.kind === "pi.assistant")
    .map((entry) => entry.payload.message.content.map((item: Json) => item.text ?? `call ${item.name}`).join(""));

function samePending(after: PendingApproval, before: PendingApproval): void {
  const { ageMs: _a, ...rest } = after;
  const { ageMs: _b, ...was } = before;
  expect(rest).toEqual(was);
}

describe("§4c a pending approval on a Durable Object outlives the object and is decided over the socket after", () => {
  it("across ctx.abort() and a cold restart of workerd: no alarm while it waits, nothing of the tool before the decision, the tool once after it", async () => {
    const name = "evicted";
    const { client, opened } = page(name);
    const { conversation, submission, pending } = await asked(client);
    expect(pending).toMatchObject({ callId: "call_1", toolName: "write_file", arguments: { path: "a.txt" } });
    expect(pending).not.toHaveProperty("expiresAt");
    const before = await state(name);
    // Nothing runs until the person decides: no timer keeps the object awake (no heartbeat, no far alarm).
    expect(before.alarm).toBeNull();
    expect(before.tasks.filter((task: Json) => task.kind === "pi.tool").map((task: Json) => task.state)).toEqual([
      // decision 0112: the state carries its step's progress stamp
      {
        status: "sleeping",
        checkpoint: { phase: "approval", arguments: { path: "a.txt" }, replay: "unsafe" },
        progressed: expect.any(Number),
      },
    ]);

    // The object dies (everything in memory is gone), then every object does (workerd stops and starts again).
    await edge.call("approval", name, "/crash").catch(() => undefined);
    const revived = await until(
      () => state(name).catch(() => undefined),
      (value) => value !== undefined && value.instance !== before.instance,
      "a new instance",
    );
    expect(revived.alarm).toBeNull();
    await edge.restart();
    const restarted = await state(name);
    expect(restarted.instance).not.toBe(revived.instance);
    expect(restarted.alarm).toBeNull();
    expect(restarted.tasks).toEqual(before.tasks);

    // The page reconnected on its own; the call still waits with the arguments it was asked with.
    const [still] = await until(
      () => client.pendingApprovals(conversation),
      (list) => list.length === 1,
      "the pending call after the restart",
    );
    samePending(still!, pending);
    expect(await client.call("instance")).toBe(restarted.instance);
    expect(opened.sockets).toBeGreaterThan(1);
    expect(lines(name).filter((line) => line.startsWith("write"))).toEqual([]);

    const record = await client.decide(conversation, pending.callId, { approved: true, argumentsHash: pending.argumentsHash });
    expect(record).toMatchObject({ status: "approved", by: "person", callId: "call_1" });
    expect(await client.waitForSubmission(submission)).toMatchObject({ status: "done" });
    const after = await state(name);
    expect(answers(after.entries)).toEqual(["call write_file", "noted: wrote a.txt"]);
    expect(lines(name).filter((line) => line.startsWith("write"))).toEqual(["write a.txt"]);
    expect(after.alarm).toBeNull();
    // Decided once: a second decision is refused, naming the first.
    await expect(client.decide(conversation, pending.callId, { approved: false })).rejects.toMatchObject({
      name: "AlreadyDecided",
      callId: "call_1",
      decision: { approved: true, by: "person" },
    });
    await client.close();
  }, 60_000);

  it("across a hibernation with the page still connected: the decision on the same socket wakes the object, the tool runs once", async () => {
    const name = "hibernated";
    const { client, opened } = page(name);
    const { conversation, submission, pending } = await asked(client);
    const first = (await client.call("instance")) as string;
    expect((await state(name)).alarm).toBeNull();

    // workerd lets an object with nothing to do go after about ten seconds; its hibernatable sockets stay. Wait in
    // silence (a message would keep it), then ask, until a new instance answers: nothing kept the old one awake.
    let woken = first;
    for (let round = 0; round < 4 && woken === first; round++) {
      await pause(11_000);
      woken = (await client.call("instance")) as string;
    }
    expect(woken).not.toBe(first);
    expect(opened.sockets).toBe(1); // the socket outlived the instance
    const [still] = await client.pendingApprovals(conversation);
    samePending(still!, pending);
    expect(lines(name).filter((line) => line.startsWith("write"))).toEqual([]);

    await client.decide(conversation, pending.callId, { approved: true, argumentsHash: pending.argumentsHash });
    expect(await client.waitForSubmission(submission)).toMatchObject({ status: "done" });
    expect(answers((await state(name)).entries)).toEqual(["call write_file", "noted: wrote a.txt"]);
    expect(lines(name).filter((line) => line.startsWith("write"))).toEqual(["write a.txt"]);
    expect(opened.sockets).toBe(1);
    await client.close();
  }, 90_000);

  it("S8 §4c: a page tool the page runs while the object hibernates: the page's socket outlives the instance, so does its claim; its answer is the call's result, nothing interrupted (decision 0028)", async () => {
    const name = "page-hibernated";
    const { client, opened } = page(name);
    await client.ready();
    const conversation = await client.rootConversation({ model: "faux/faux-1" });
    let answer: ((choice: string) => void) | undefined;
    const running = new Promise<void>((started) => {
      void client.providePageTools(conversation, {
        ask_person: () =>
          new Promise<string>((resolve) => {
            answer = resolve;
            started();
          }),
      });
    });
    const submission = await client.submit(conversation, { type: "input", content: "ask me" });
    await running; // claimed: the page runs the tool now
    const first = (await client.call("instance")) as string;
    let woken = first;
    for (let round = 0; round < 4 && woken === first; round++) {
      await pause(11_000);
      woken = (await client.call("instance")) as string;
    }
    expect(woken).not.toBe(first);
    expect(opened.sockets).toBe(1); // the socket outlived the instance
    answer!("green");
    expect(await client.waitForSubmission(submission)).toMatchObject({ status: "done" });
    expect(answers((await state(name)).entries)).toEqual(["call ask_person", "noted: green"]);
    await client.close();
  }, 90_000);

  it("an expiry fails closed: the one alarm is at the expiry, it wakes the aborted object with no request, the call is denied 'expired' and never runs", async () => {
    const name = "expiring-call";
    const { client } = page(name);
    const { conversation, submission, pending } = await asked(client);
    expect(pending.expiresAt).toBe(pending.requestedAt + EXPIRES_AFTER_MS);
    const before = await state(name);
    expect(before.alarm).toBe(pending.expiresAt); // the expiry, and nothing else
    await client.close();

    // The object dies; no request comes after this: only its alarm can start it again.
    await edge.call("approval", name, "/crash").catch(() => undefined);
    await edge.printed.until(
      () => lines(name, before.id).includes("request after toolResult"),
      "the model's request after the expiry's denial",
    );
    const after = await state(name);
    expect(answers(after.entries)).toEqual([
      "call write_file",
      "noted: <harness>\n[error] Tool write_file was not run: no decision came before its approval expired\n</harness>",
    ]);
    expect(lines(name, before.id).filter((line) => line.startsWith("write"))).toEqual([]);
    expect(after.alarm).toBeNull();

    // A decision after the expiry is told what happened.
    const late = page(name).client;
    await late.ready();
    expect(await late.waitForSubmission(submission)).toMatchObject({ status: "done" });
    expect(await late.pendingApprovals(conversation)).toEqual([]);
    await expect(late.decide(conversation, pending.callId, { approved: true })).rejects.toMatchObject({
      name: "AlreadyDecided",
      decision: { approved: false, reason: "expired", by: "expiry", decidedAt: pending.expiresAt },
    });
    await late.close();
  }, 60_000);
});
