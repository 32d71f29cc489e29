import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Json } from "../src/base/json.ts";
import { ARRIVAL_WAIT_MS, followingWrites, writesThroughObject } from "../src/browser/follow-writes.ts";
import { abortThroughObject, COPY, COPY_TOPIC, decideThroughObject, submitThroughObject } from "../src/follow/copy-writes.ts";
import { Follower } from "../src/follow/follower.ts";
import { remoteArbiter } from "../src/follow/mirror.ts";
import type { FollowAction, FollowRequest } from "../src/follow/object-end-options.ts";
import { rebuildFromObject } from "../src/follow/snapshot.ts";
import { MAX_WAITING_PER_CALLER, WaitingWrites } from "../src/follow/waiting-writes.ts";
import { FOLLOW_TOPICS } from "../src/follow/wire.ts";
import { hostEndpoint } from "../src/host/endpoint.ts";
import type { HarnessService } from "../src/host/protocol.ts";
import { type AnyTool, createRegistry, defineExtension, defineTool, Harness, InvalidSubmission, ReadOnlySession } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { answer, callTools } from "./agent-support.ts";
import { copyWorld, oneCopy, settleInto } from "./follow-copy-world.ts";
import { ctx, flush, hostileJson, runUntil } from "./support.ts";

// Decision 0097 (issue 27 item 2): a tab on another device that follows the object could submit through it (decision
// 0096) but not decide a tool call that waits for a person, nor stop the conversation: its read-only harness refused
// both (`ReadOnlySession`) and the object refused `copy.decide` / `copy.abortConversation` ("there is no call"). Now
// both go over the follow link as `copy.submit` does, behind `follow.authorize`, forwarded to the holder under their
// key; and one caller has at most `MAX_WAITING_PER_CALLER` distinct writes waiting at the object.

/** A tool that waits for a person (S8's approval phase), counting its runs. */
function noteTool(runs: string[]): AnyTool {
  return defineTool<{ text: string }>({
    name: "note",
    description: "Write a note",
    parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
    approval: "always",
    async execute({ text }) {
      runs.push(text);
      return "noted";
    },
  });
}

/** The world with the tab's turn waiting for a decision on `call_1` (mirrored to the object). */
async function waitingWorld(door: (action: FollowAction, place?: string, request?: FollowRequest) => boolean = () => true) {
  const runs: string[] = [];
  const w = await copyWorld(door, { steps: [callTools([["note", { text: "a" }, "call_1"]]), answer("done")], tools: [noteTool(runs)] });
  const submission = await w.root.submit({ type: "input", content: "note it", requestId: "q" }, ctx);
  await runUntil(w.clock, () => w.root.pendingApprovals().length === 1);
  await runUntil(w.clock, () => w.mirror.acknowledged >= (w.tab.lease?.position ?? 0));
  return { ...w, runs, submission };
}

describe("a following tab decides and aborts through the object, forwarded to the holder under their key (decision 0097)", () => {
  it("0097 S8: the phone's copy.decide, sent twice at once and once more after the answer under one decisionId, is made once: one record, the tool runs once", async () => {
    const asked: Array<[FollowAction, FollowRequest | undefined]> = [];
    const w = await waitingWorld((action, _place, request) => {
      asked.push([action, request]);
      return true;
    });
    const call = (topic: string, method: string, args: Json[]) => w.phone.call(topic, method, args);
    const decision = { approved: true, decisionId: "phone-d1" };
    const answers: unknown[] = [];
    settleInto(answers, decideThroughObject(call, w.root.id, "call_1", decision));
    settleInto(answers, decideThroughObject(call, w.root.id, "call_1", decision));
    await runUntil(w.clock, () => answers.length === 2);
    settleInto(answers, decideThroughObject(call, w.root.id, "call_1", decision));
    await runUntil(w.clock, () => answers.length === 3);
    const records = answers.map((outcome) => (outcome as { value: { status: string; decidedAt: number; decisionId: string } }).value);
    expect(records.map((record) => record.status)).toEqual(["approved", "approved", "approved"]);
    expect(new Set(records.map((record) => record.decidedAt)).size).toBe(1);
    expect(records[0]!.decisionId).toBe("phone-d1");
    expect((await w.submission.wait(ctx)).status).toBe("done");
    expect(w.runs).toEqual(["a"]);
    // The two at once shared one forward; the one after it crossed again and the holder answered its record by the key.
    expect(w.forwards).toEqual(["decide", "decide"]);
    // Another decision (another key) is decide's own refusal, its fields across the link; an unknown call is NotFound.
    const late: unknown[] = [];
    const refusedLate = decideThroughObject(call, w.root.id, "call_1", { approved: false, decisionId: "phone-d2" }).catch(
      (error: unknown) => error,
    );
    settleInto(late, decideThroughObject(call, w.root.id, "call_9", { approved: true, decisionId: "phone-d3" }));
    const refused = (await refusedLate) as { name: string; callId: string; decision: { approved: boolean } };
    await runUntil(w.clock, () => late.length === 1);
    expect(refused.name).toBe("AlreadyDecided");
    expect(refused.callId).toBe("call_1");
    expect(refused.decision.approved).toBe(true);
    expect(late).toEqual([expect.objectContaining({ name: "NotFound" })]);
    expect(asked.filter(([action]) => action === "copy.decide").map(([, request]) => request)).toContainEqual({
      conversationId: w.root.id,
    });
    w.mirror.stop();
  });

  it("0097: the phone's copy.abortConversation stops the holder's run (its input unanswered, aborted), once; sent again once nothing runs, it is answered and nothing is sent", async () => {
    const asked: FollowAction[] = [];
    const w = await copyWorld(
      (action) => {
        asked.push(action);
        return true;
      },
      { steps: [{ hang: "thinking" }, answer("second")] },
    );
    const first = await w.root.submit({ type: "input", content: "one", requestId: "one" }, ctx);
    await runUntil(w.clock, () => w.models.hanging === 1);
    await runUntil(w.clock, () => w.mirror.acknowledged >= (w.tab.lease?.position ?? 0));
    const call = (topic: string, method: string, args: Json[]) => w.phone.call(topic, method, args);
    const answers: unknown[] = [];
    settleInto(answers, abortThroughObject(call, w.root.id));
    settleInto(answers, abortThroughObject(call, w.root.id));
    await runUntil(w.clock, () => answers.length === 2);
    expect(answers).toEqual([{ value: undefined }, { value: undefined }]);
    expect(await first.wait(ctx)).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect(w.forwards.filter((method) => method === "abortConversation")).toHaveLength(1);
    const second = await w.root.submit({ type: "input", content: "two", requestId: "two" }, ctx);
    expect(await second.wait(ctx)).toMatchObject({ status: "done", answer: { text: "second" } });
    await runUntil(w.clock, () => w.mirror.acknowledged >= (w.tab.lease?.position ?? 0));
    settleInto(answers, abortThroughObject(call, w.root.id)); // the copy shows nothing running: answered, nothing sent
    await runUntil(w.clock, () => answers.length === 3);
    expect(answers[2]).toEqual({ value: undefined });
    expect(w.forwards.filter((method) => method === "abortConversation")).toHaveLength(1);
    expect(asked).toContain("copy.abortConversation");
    w.mirror.stop();
  });

  it("0097: a door that says no for the conversation refuses copy.decide and copy.abortConversation (NotAuthorized); nothing is forwarded", async () => {
    const w = await waitingWorld((action, _place, request) => !action.startsWith("copy.") || request?.conversationId !== 1);
    const call = (topic: string, method: string, args: Json[]) => w.phone.call(topic, method, args);
    const outcomes: unknown[] = [];
    settleInto(outcomes, decideThroughObject(call, w.root.id, "call_1", { approved: true, decisionId: "no" }));
    settleInto(outcomes, abortThroughObject(call, w.root.id));
    await runUntil(w.clock, () => outcomes.length === 2);
    expect(outcomes.map((outcome) => (outcome as { name: string }).name)).toEqual(["NotAuthorized", "NotAuthorized"]);
    expect(w.sent).toEqual([]);
    expect(w.root.pendingApprovals()).toHaveLength(1);
    w.mirror.stop();
  });

  it("0097: an object of decision 0096 (topic copy with submit alone) refuses copy.decide and copy.abortConversation alone, typed; the link goes on", async () => {
    const topics = { ...FOLLOW_TOPICS, [COPY]: { calledBy: "tab" as const, methods: { submit: COPY_TOPIC.methods.submit } } };
    const w = await copyWorld(() => true, { topics });
    const call = (topic: string, method: string, args: Json[]) => w.phone.call(topic, method, args);
    const outcomes: unknown[] = [];
    settleInto(outcomes, decideThroughObject(call, w.root.id, "call_1", { approved: true, decisionId: "old" }));
    settleInto(outcomes, abortThroughObject(call, w.root.id));
    await runUntil(w.clock, () => outcomes.length === 2);
    expect(outcomes).toEqual([
      { name: "FollowMessageRefused", message: expect.stringContaining("there is no call copy.decide") },
      { name: "FollowMessageRefused", message: expect.stringContaining("there is no call copy.abortConversation") },
    ]);
    let id: number | undefined;
    void submitThroughObject(call, w.root.id, { type: "input", content: "still", requestId: "still" }).then((got) => (id = got));
    await runUntil(w.clock, () => id !== undefined);
    expect(await w.submissions("still")).toEqual([{ id }]);
    w.mirror.stop();
  });
});

describe("one caller's writes waiting at the object are bounded (decision 0097)", () => {
  it("0097: past MAX_WAITING_PER_CALLER distinct writes waiting, a caller's next is TooManyWaitingWrites on any of its connections, nothing forwarded or stored; its retry and another caller's write go on", async () => {
    const w = await copyWorld(() => true);
    w.holderAway.value = true;
    const alice = w.device(undefined, "alice");
    const aliceAgain = w.device(undefined, "alice");
    const bob = w.device(undefined, "bob");
    const draft = (requestId: string) => ({ type: "input" as const, content: requestId, requestId });
    const outcomes = new Map<string, unknown>();
    const send = (phone: typeof alice, requestId: string, as = requestId) =>
      submitThroughObject(phone.call, w.root.id, draft(requestId)).then(
        (value) => outcomes.set(as, { value }),
        (error: Error & { limit?: number }) => outcomes.set(as, { name: error.name, limit: error.limit, message: error.message }),
      );
    for (let i = 0; i < MAX_WAITING_PER_CALLER; i++) void send(alice, `a-${i}`);
    const keysSent = () => new Set(w.sent.map((write) => (write.args[1] as { requestId: string }).requestId));
    await runUntil(w.clock, () => keysSent().size === MAX_WAITING_PER_CALLER);
    void send(aliceAgain, "a-over");
    void send(alice, "a-0", "a-0 again");
    void send(bob, "b-0");
    await runUntil(w.clock, () => outcomes.has("a-over") && keysSent().has("b-0"));
    expect(outcomes.get("a-over")).toMatchObject({ name: "TooManyWaitingWrites", limit: MAX_WAITING_PER_CALLER });
    expect((outcomes.get("a-over") as { message: string }).message).toMatch(/Nothing was forwarded or stored/);
    expect(outcomes.has("a-0 again")).toBe(false); // it joined a-0, still waiting
    expect(keysSent().has("a-over")).toBe(false);
    // The holder comes back: everything that waited is made once; the refused write is nowhere.
    w.holderAway.value = false;
    await runUntil(
      w.clock,
      async () => (await w.tab.storage.query("SELECT COUNT(*) AS n FROM submissions"))[0]!.n === MAX_WAITING_PER_CALLER + 1,
    );
    expect(await w.submissions("a-over")).toEqual([]);
    expect(await w.submissions("b-0")).toHaveLength(1);
    // Once answered, there is room again.
    let after: number | undefined;
    void submitThroughObject(aliceAgain.call, w.root.id, draft("a-after")).then((got) => (after = got));
    await runUntil(w.clock, () => after !== undefined);
    expect(await w.submissions("a-after")).toEqual([{ id: after }]);
    w.mirror.stop();
  });
});

describe("a caller's pages at the copy and its following tab share one share (decision 0097)", () => {
  it("0097: a page's submits at the object's copy count in its caller's share with that caller's follow link: past it TooManyWaitingWrites, nothing forwarded; another caller's page goes on", async () => {
    const waiting = new WaitingWrites();
    const w = await copyWorld(() => true, { copyWrites: { waiting } });
    w.holderAway.value = true;
    const alice = w.device(undefined, "alice");
    // The pages' endpoints at the copy, as the object serves them: each bound to its caller's key (caller:<key>).
    const alicePage = waiting.bound(hostEndpoint(w.copy.service), "caller:alice");
    const bobPage = waiting.bound(hostEndpoint(w.copy.service), "caller:bob");
    const draft = (requestId: string) => ({ type: "input" as const, content: requestId, requestId });
    const outcomes = new Map<string, unknown>();
    const note = (as: string, promise: Promise<unknown>) =>
      promise.then(
        (value) => outcomes.set(as, { value }),
        (error: Error) => outcomes.set(as, { name: error.name }),
      );
    for (let i = 0; i < MAX_WAITING_PER_CALLER - 1; i++) void note(`p-${i}`, alicePage.call("submit", [w.root.id, draft(`p-${i}`)]));
    void note("tab-0", submitThroughObject(alice.call, w.root.id, draft("tab-0")));
    const keysSent = () => new Set(w.sent.map((write) => (write.args[1] as { requestId: string }).requestId));
    await runUntil(w.clock, () => keysSent().size === MAX_WAITING_PER_CALLER);
    void note("p-over", alicePage.call("submit", [w.root.id, draft("p-over")]));
    void note("b-0", bobPage.call("submit", [w.root.id, draft("b-0")]));
    await runUntil(w.clock, () => outcomes.has("p-over") && keysSent().has("b-0"));
    expect(outcomes.get("p-over")).toEqual({ name: "TooManyWaitingWrites" });
    expect(keysSent().has("p-over")).toBe(false);
    w.holderAway.value = false;
    await runUntil(
      w.clock,
      async () => (await w.tab.storage.query("SELECT COUNT(*) AS n FROM submissions"))[0]!.n === MAX_WAITING_PER_CALLER + 1,
    );
    expect(await w.submissions("p-over")).toEqual([]);
    w.mirror.stop();
  });
});

describe("copy.decide and copy.abortConversation under random input (decision 0097)", () => {
  it("0097 property: arguments that are not a keyed decision or a conversation's abort, or name a conversation the copy lacks, are refused typed with no internals; nothing is forwarded, stored or logged", async () => {
    const w = await waitingWorld();
    const phone = w.device();
    const head = w.tab.lease?.position;
    const conversation = fc.oneof(fc.constantFrom(w.root.id, 2, 999), fc.integer(), hostileJson(1));
    const callRef = fc.oneof(fc.constantFrom("call_1", "", 0), fc.string({ maxLength: 8 }), fc.integer(), hostileJson(1));
    const decision = fc.record(
      {
        approved: fc.oneof(fc.boolean(), hostileJson(1)),
        reason: hostileJson(1),
        argumentsHash: fc.oneof(fc.string({ maxLength: 8 }), fc.integer()),
        decisionId: fc.oneof(fc.string({ maxLength: 8 }), hostileJson(1)),
        extra: hostileJson(2),
      },
      { requiredKeys: [] },
    );
    const shaped = fc.tuple(conversation, callRef, decision).map((values) => values as unknown[]);
    const loose = fc.array(fc.oneof(hostileJson(3), decision, fc.integer()), { maxLength: 4 });
    const argsOf = fc.oneof(
      shaped,
      loose,
      conversation.map((value) => [value]),
    );
    await fc.assert(
      fc.asyncProperty(argsOf, fc.constantFrom("decide", "abortConversation"), async (values, method) => {
        // A well-formed call on the conversation the copy holds is served: its cases are the tests above.
        fc.pre(COPY_TOPIC.methods[method](values) !== undefined || values[0] !== w.root.id);
        let outcome: { error?: Error; value?: unknown } | undefined;
        phone.call(COPY, method, values as Json[]).then(
          (value) => (outcome = { value }),
          (error: Error) => (outcome = { error }),
        );
        await runUntil(w.clock, () => outcome !== undefined);
        expect(outcome?.error?.name).toMatch(/^(FollowMessageRefused|InvalidArguments|NotAuthorized|NotFound)$/);
        expect(JSON.stringify({ name: outcome?.error?.name, message: outcome?.error?.message })).not.toMatch(/\.ts:\d+|\n\s+at /);
      }),
      { numRuns: 60, seed: 97 },
    );
    expect(phone.heard.some((frame) => frame.includes('"stack"'))).toBe(false); // no stack frame crossed
    expect(w.sent).toEqual([]);
    expect(w.root.pendingApprovals()).toHaveLength(1);
    expect(w.tab.lease?.position).toBe(head);
    w.mirror.stop();
  });
});

describe("the worker's decide and abort while its tab follows (decision 0097)", () => {
  it("0097 S5: a following phone's read-only harness refuses decide (ReadOnlySession); the worker's service decides through the object and answers once the phone's copy no longer shows the call waiting; a malformed decision is refused here, sent nowhere", async () => {
    const w = await waitingWorld();
    const phoneStorage = await openSqliteStorage({ vfs: "memory" });
    const rebuilt = rebuildFromObject({ storage: phoneStorage, link: w.phone, place: "phone", now: w.clock.now() }, ctx);
    await runUntil(w.clock, async () => (await phoneStorage.load()).log !== undefined);
    await rebuilt;
    const runs: string[] = [];
    const phone = await Harness.open(
      phoneStorage,
      {
        registry: createRegistry().install(defineExtension({ name: "test", tools: [noteTool(runs)] })),
        clock: w.clock,
        lease: { place: "phone", arbiter: remoteArbiter(w.phone) },
      },
      ctx,
    );
    expect(phone.readOnly).toBe(true);
    const follower = new Follower({ harness: phone, link: w.phone, place: "phone" });
    await runUntil(w.clock, () => follower.following && phone.conversation(w.root.id).pendingApprovals().length === 1);
    const local = {
      decide: (conversationId: number, call: string | number, decision: { approved: boolean }) =>
        phone.conversation(conversationId).decide(call, decision, ctx),
      abortConversation: (conversationId: number) => phone.conversation(conversationId).abort(ctx),
    } as unknown as HarnessService;
    const follow = {
      place: "elsewhere" as const,
      ...followingWrites((topic, method, args) => w.phone.call(topic, method, args), oneCopy(phone), w.clock),
    };
    await expect(local.decide(w.root.id, "call_1", { approved: true })).rejects.toBeInstanceOf(ReadOnlySession);
    const service = writesThroughObject(local, follow);
    await expect(service.decide(w.root.id, "call_1", { approved: "yes" } as never)).rejects.toBeInstanceOf(InvalidSubmission);
    expect(w.sent).toEqual([]);
    let record: { status: string; decisionId?: string } | undefined;
    void service.decide(w.root.id, "call_1", { approved: true }).then((got) => (record = got));
    await runUntil(w.clock, () => record !== undefined);
    expect(record?.status).toBe("approved");
    expect(record?.decisionId).toEqual(expect.any(String)); // minted by the worker: a retry is carried out once
    // Answered once the phone's own copy shows it decided: its page reads pendingApprovals next.
    expect(phone.conversation(w.root.id).pendingApprovals()).toEqual([]);
    await runUntil(w.clock, () => w.runs.length === 1);
    expect(w.runs).toEqual(["a"]);
    // The phone's abort goes the same way (nothing runs now: answered, nothing forwarded).
    await expect(local.abortConversation(w.root.id)).rejects.toBeInstanceOf(ReadOnlySession);
    let aborted = false;
    void service.abortConversation(w.root.id).then(() => (aborted = true));
    await runUntil(w.clock, () => aborted);
    expect(runs).toEqual([]); // the phone's own copy never ran the tool
    follower.stop();
    await phone.close(ctx);
    w.mirror.stop();
  });
});

describe("a following tab's copy rebuilt while its write waits (decision 0097, 0096's seam)", () => {
  it("0097: a submit whose copy closed for a rebuild before the answer came is answered once the rebuilt copy holds it, not with an id no copy of the tab holds", async () => {
    await submitDuringRebuild(0);
  });

  it("0103: a rebuild that outlasts ARRIVAL_WAIT_MS does not let the answer go while no copy is open; the rebuilt copy is waited for", async () => {
    await submitDuringRebuild(ARRIVAL_WAIT_MS + 5_000);
  });
});

/** A following phone's submit through the object; its copy closes for a rebuild that takes `rebuildMs` of the harness clock. */
async function submitDuringRebuild(rebuildMs: number): Promise<void> {
  const w = await copyWorld(() => true);
  const joinAs = async (place: string) => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    const rebuilt = rebuildFromObject({ storage, link: w.phone, place, now: w.clock.now() }, ctx);
    await runUntil(w.clock, async () => (await storage.load()).log !== undefined);
    await rebuilt;
    const harness = await Harness.open(
      storage,
      { registry: createRegistry(), clock: w.clock, lease: { place, arbiter: remoteArbiter(w.phone) } },
      ctx,
    );
    const follower = new Follower({ harness, link: w.phone, place });
    await runUntil(w.clock, () => follower.following);
    return { harness, follower };
  };
  const first = await joinAs("phone");
  let current = first.harness;
  const attached = new Set<() => void>();
  const copies = {
    current: () => current,
    onAttach: (listener: () => void) => {
      attached.add(listener);
      return () => attached.delete(listener);
    },
  };
  const writes = followingWrites((topic, method, args) => w.phone.call(topic, method, args), copies, w.clock);
  let answered: { id: number; copy: Harness } | undefined;
  void writes
    .submit(w.root.id, { type: "input", content: "during a rebuild", requestId: "seam-1" })
    .then((id) => (answered = { id, copy: current }));
  // The copy cannot follow (forked): it is closed for its rebuild before the object's answer arrives.
  first.follower.stop();
  await first.harness.close(ctx);
  await runUntil(w.clock, async () => (await w.submissions("seam-1")).length === 1);
  await runUntil(w.clock, () => w.mirror.acknowledged >= (w.tab.lease?.position ?? 0));
  expect(answered).toBeUndefined(); // before: answered at once, with an id no copy of the tab held
  // Before 0103, past ARRIVAL_WAIT_MS with no copy open: answered, with an id no copy of the tab held.
  w.clock.advance(rebuildMs);
  await flush(4);
  expect(answered).toBeUndefined();
  const second = await joinAs("phone");
  current = second.harness;
  for (const listener of attached) listener();
  await runUntil(w.clock, () => answered !== undefined);
  expect(answered?.copy).toBe(second.harness);
  expect((await second.harness.storage.getSubmission(answered!.id))?.requestId).toBe("seam-1");
  second.follower.stop();
  await second.harness.close(ctx);
  w.mirror.stop();
}
