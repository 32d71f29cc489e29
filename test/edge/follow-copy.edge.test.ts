import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { counterTask } from "../../examples/counter-task.ts";
import { encodeFollowMessage } from "../../src/follow/wire.ts";
import { PAGE_TEST_HOOK } from "../../src/host/protocol.ts";
import { type ConversationViewState, BACKGROUND_CONTEXT as ctx, type Inspection } from "../../src/index.ts";
import { openAgentTab, openDevice } from "./follow-copy-support.ts";
import { followSocket, until } from "./follow-support.ts";
import { type Edge, startEdge } from "./support.ts";

// Issue 27 item 2's last half (decisions 0034, 0037) in workerd: while a Node-side tab holds the lease and pushes,
// the object serves its copy to other devices on its ordinary page socket — live, read-only — and forwards their
// submissions and decisions to the tab under their keys, on the tab's follow socket.

describe("the object serves its copy to other devices while the tab holds the lease (issue 27 item 2, decision 0037)", () => {
  let edge: Edge;
  beforeAll(async () => {
    edge = await startEdge();
  }, 120_000);
  afterAll(async () => {
    await edge?.dispose();
  });

  it("S5/S8: a second socket watches the copy live, submits to the tab and decides its approval; the tab runs the tool once, a retry under the same keys gets the same answers", async () => {
    const name = "copy-live";
    const tab = await openAgentTab(edge, name);
    const root = await tab.harness.root(ctx, { agent: { model: "faux/faux-1" } });
    await until("the root acknowledged", () => tab.mirror.acknowledged >= tab.harness.lease!.position);
    const device = openDevice(edge, name);
    await device.ready();
    // Who holds the lease, from the object's own record (decision 0067): the tab, by its place.
    expect(device.status).toMatchObject({ kind: "ready", runs: "elsewhere", heldBy: { kind: "tab", place: "tab" } });
    // pi-durable-web/testing's waitForReady finds a page's client of an object by URL, as it finds a worker's.
    expect((globalThis as Record<string, unknown> & { [PAGE_TEST_HOOK]?: Set<unknown> })[PAGE_TEST_HOOK]?.has(device)).toBe(true);
    let view: ConversationViewState | undefined;
    const seen = new Set<number>();
    device.watchConversation(root.id, (state) => {
      view = state;
      seen.add(state.entries.length);
    });
    const draft = { type: "input" as const, content: "write a.txt", requestId: "r1" };
    const submitted = await device.submit(root.id, draft);
    const pending = await until("the approval reaches the copy", async () => (await device.pendingApprovals(root.id))[0]);
    expect(pending).toMatchObject({ callId: "call_1", toolName: "write_file" });
    expect(tab.written).toEqual([]); // it waits for the person
    const decision = { approved: true, decisionId: "d1" };
    const decided = await device.decide(root.id, "call_1", decision);
    expect(decided).toMatchObject({ status: "approved", decisionId: "d1" });
    // The same calls again (a retry after a lost answer): the same answers, nothing made twice.
    expect(await device.submit(root.id, draft)).toBe(submitted);
    expect(await device.decide(root.id, "call_1", decision)).toMatchObject({ status: "approved", decisionId: "d1" });
    const outcome = await device.waitForSubmission(submitted);
    expect(outcome).toMatchObject({ status: "done", answer: { text: "wrote it" } });
    expect(tab.written).toEqual(["a.txt"]);
    // The device's view is the tab's, reached live (the turn's states arrived one push at a time).
    const entries = await root.entries(ctx);
    await until("the device's view meets the tab's", () => view?.entries.length === entries.length);
    expect(view?.entries).toEqual((await root.view(ctx)).entries);
    expect(seen.size).toBeGreaterThanOrEqual(3);
    expect(entries.filter((entry) => entry.kind === "pi.user")).toHaveLength(1);
    expect((await tab.harness.submission(submitted, ctx)).id).toBe(submitted);
    // What a copy does not forward says where the conversation runs.
    await expect(device.compact(root.id)).rejects.toMatchObject({
      name: "RunsElsewhere",
      place: `tab (lease epoch ${tab.harness.lease!.epoch})`,
    });
    device.terminate();
    await tab.harness.close(ctx);
    tab.socket.stop();
  });

  it("hostile frames: an answer to a call the object never made, a forward called by a tab, malformed page writes — refused, nothing written", async () => {
    const name = "copy-hostile";
    const tab = await openAgentTab(edge, name);
    const root = await tab.harness.root(ctx, { agent: { model: "faux/faux-1" } });
    await until("the root acknowledged", () => tab.mirror.acknowledged >= tab.harness.lease!.position);
    const head = tab.harness.lease!.position;
    const mallory = followSocket(edge, name, "mallory");
    const alice = followSocket(edge, name, "alice");
    await until("both sockets open", () => mallory.open && alice.open);
    // Answers to ids the object never sent (its ids are random per instance): nothing is settled or applied.
    mallory.send(encodeFollowMessage({ type: "answer", id: "1", value: { method: "submit", submissionId: 1 } }));
    // A tab may not call the object's topic `forward`.
    const forged = encodeFollowMessage({
      type: "call",
      id: "f1",
      topic: "forward",
      method: "submit",
      args: [root.id, { type: "input", content: "forged", requestId: "x" }],
    });
    alice.send(forged);
    await until("the forged call refused", () => alice.received.length >= 1);
    expect(JSON.parse(alice.received[0]!)).toMatchObject({
      type: "answer",
      id: "f1",
      error: { name: "FollowMessageRefused", details: { reason: "shape" } },
    });
    const device = openDevice(edge, name);
    await device.ready();
    const wrong = [
      () => device.submit(root.id, { type: "input", content: "x", requestId: "r", extra: 1 } as never),
      () => device.submit(root.id, { type: "input", content: "x".repeat(2_000_000), requestId: "r2" }),
      () => device.decide(root.id, "call_1", { approved: "yes" } as never),
      () => device.submit(999, { type: "input", content: "x", requestId: "r3" }),
    ];
    const names: string[] = [];
    for (const call of wrong)
      names.push(
        await call().then(
          () => "resolved",
          (error: Error) => error.name,
        ),
      );
    expect(names).toEqual(["InvalidArguments", "FollowMessageRefused", "InvalidArguments", "NotFound"]);
    expect(tab.forwards).toEqual([]); // nothing crossed to the tab
    expect(tab.harness.lease!.position).toBe(head);
    expect(await root.entries(ctx)).toEqual([]);
    device.terminate();
    mallory.stop();
    alice.stop();
    await tab.harness.close(ctx);
    tab.socket.stop();
  });

  it("0097: one caller's page writes waiting for a slow tab are bounded (32, then TooManyWaitingWrites, nothing forwarded); another caller's go on, and all that waited are made once", async () => {
    const name = "copy-bound";
    const tab = await openAgentTab(edge, name);
    const root = await tab.harness.root(ctx, { agent: { model: "faux/faux-1" } });
    await until("the root acknowledged", () => tab.mirror.acknowledged >= tab.harness.lease!.position);
    const bob = openDevice(edge, name, "bob");
    const carol = openDevice(edge, name, "carol");
    await bob.ready();
    await carol.ready();
    const release = tab.hold();
    const draft = (requestId: string) => ({ type: "input" as const, content: requestId, requestId });
    const waiting = Array.from({ length: 32 }, (_, i) => bob.submit(root.id, draft(`bob-${i}`)));
    await until("the tab was sent bob's 32", () => tab.requestIds.size === 32);
    const over = await bob.submit(root.id, draft("bob-over")).then(
      () => "made",
      (error: Error & { limit?: number }) => `${error.name} ${error.limit}`,
    );
    expect(over).toBe("TooManyWaitingWrites 32");
    const carols = carol.submit(root.id, draft("carol-0"));
    release();
    const ids = await Promise.all([...waiting, carols]);
    expect(new Set(ids).size).toBe(33);
    expect(await tab.harness.storage.findSubmission(root.id, "bob-over")).toBeUndefined();
    expect(tab.requestIds.has("bob-over")).toBe(false);
    expect((await tab.harness.storage.findSubmission(root.id, "carol-0"))?.id).toBe(ids.at(-1));
    bob.terminate();
    carol.terminate();
    await tab.harness.close(ctx);
    tab.socket.stop();
  });

  it("ctx.abort() while a forward waits for the tab: the device's retry under the same requestId gets the one submission", async () => {
    const name = "copy-abort";
    const tab = await openAgentTab(edge, name);
    const root = await tab.harness.root(ctx, { agent: { model: "faux/faux-1" } });
    await until("the root acknowledged", () => tab.mirror.acknowledged >= tab.harness.lease!.position);
    const device = openDevice(edge, name);
    await device.ready();
    const release = tab.hold();
    const draft = { type: "input" as const, content: "write a.txt", requestId: "r-abort" };
    const first = device.submit(root.id, draft).then(
      (id) => ({ id }),
      (error: Error) => ({ error: error.name }),
    );
    await until("the forward reached the tab", () => tab.forwards.length >= 1);
    await edge.call("follow", name, "/abort").catch(() => {});
    expect(await first).toEqual({ error: "ConnectionLost" }); // the object went away with the call in flight
    release(); // the tab makes the write now; its answer goes to a socket that is gone
    const retried = await until("the retry answered", () =>
      device.submit(root.id, draft).then(
        (id) => id,
        () => undefined,
      ),
    );
    await until("the submission is stored at the tab", async () => (await tab.harness.storage.findSubmission(root.id, "r-abort"))?.id);
    expect((await tab.harness.storage.findSubmission(root.id, "r-abort"))?.id).toBe(retried);
    const users = (await root.entries(ctx)).filter((entry) => entry.kind === "pi.user");
    expect(users).toHaveLength(1);
    device.terminate();
    await tab.harness.close(ctx);
    tab.socket.stop();
  });
  it("S4/S12: at the takeover a device's subscriptions move to the object's harness: it watches the counter to its end and its status says where the agent runs", async () => {
    const name = "copy-takeover";
    const tab = await openAgentTab(edge, name);
    const root = await tab.harness.root(ctx);
    await until("the root acknowledged", () => tab.mirror.acknowledged >= tab.harness.lease!.position);
    const device = openDevice(edge, name);
    await device.ready();
    const runs: Array<string | undefined> = [];
    device.onStatus((status) => {
      if (status.kind === "ready" && runs.at(-1) !== status.runs) runs.push(status.runs);
    });
    const counts: number[] = [];
    device.watchTasks((inspection: Inspection) => {
      // The graph holds live tasks: once the counter ended it is gone from it (41 stands for that).
      const task = inspection.tasks.find((one) => one.record.kind === "example.counter")?.record;
      const n = task ? (task.state as { checkpoint?: { n: number } }).checkpoint?.n : counts.length > 0 ? 41 : undefined;
      if (n !== undefined && counts.at(-1) !== n) counts.push(n);
    });
    const counter = counterTask(() => {});
    const taskId = await root.commit((tx) => tx.createTask(counter, { to: 40 }), ctx);
    await until("the device sees the tab count to 3", () => counts.includes(3));
    await tab.mirror.handOver(ctx); // drains, pushes the rest, releases: the object takes epoch 2
    await until("the device sees the object finish", () => counts.at(-1) === 41, 800);
    expect(runs).toEqual(["elsewhere", "here"]);
    // One subscription saw both places' counting, in order, nothing shown twice, ending with the object's.
    expect(counts).toEqual([...counts].sort((a, b) => a - b));
    expect(new Set(counts).size).toBe(counts.length);
    expect(await device.getTask(taskId)).toMatchObject({
      state: { status: "terminal", outcome: { status: "completed", result: "counted to 40" } },
    });
    device.terminate();
    tab.socket.stop();
  });
});
