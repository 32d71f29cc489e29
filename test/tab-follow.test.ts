import { describe, expect, it, vi } from "vitest";
import { followObject } from "../src/browser/follow.ts";
import type { SocketLike } from "../src/browser/socket.ts";
import { encodeFollowMessage } from "../src/follow/wire.ts";
import { createRegistry, Harness } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { eventLoopStarved } from "../src/storage/sqlite/wasm/event-loop.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { memoryObjectEnd } from "./follow-support.ts";
import { type AskedCall, holds, intentInCopy } from "./server-call-copy-support.ts";
import { ctx } from "./support.ts";

/**
 * The worker's follow link as `serveHarness({ follow })` wires it (src/browser/follow.ts), over an in-memory socket to
 * a real ObjectEnd: the tab answers the object's forwarded writes (decision 0034) and asks the object for its server
 * tools (decision 0036) on that link.
 */
async function tabAndObject() {
  const clock = createManualClock(1_000);
  const { end, storage } = await memoryObjectEnd(clock);
  const fromTab: string[] = [];
  const listeners: Record<string, Array<(event?: { data: unknown }) => void>> = { open: [], message: [], close: [], error: [] };
  const toTab = (frame: string) =>
    setTimeout(() => {
      for (const listener of listeners.message!) listener({ data: frame });
    }, 0);
  const socket: SocketLike = {
    send(frame) {
      fromTab.push(frame);
      setTimeout(() => void end.receive(frame, toTab, () => true), 0);
    },
    close() {},
    addEventListener(type: string, listener: (event?: { data: unknown }) => void) {
      listeners[type]!.push(listener);
    },
  } as SocketLike;
  const follow = followObject({ url: "ws://object/follow", connect: () => socket }, clock);
  setTimeout(() => {
    for (const listener of listeners.open!) listener();
  }, 0);
  const tab = await Harness.open(
    await openSqliteStorage({ vfs: "memory" }),
    { registry: createRegistry(), clock, lease: follow.lease, serverCalls: follow.serverCalls },
    ctx,
  );
  follow.attach(tab);
  return { tab, end, follow, fromTab, toTab, storage };
}

describe("a tab's follow link (decisions 0034, 0036)", () => {
  it("0034: a write another device made at the object's copy, forwarded to the tab that holds the lease, is admitted once and answered", async () => {
    const { tab, fromTab, toTab, follow } = await tabAndObject();
    expect(follow.place).toBe("here");
    const root = await tab.root(ctx, { agent: { model: "faux/faux-1" } });
    const forward = { type: "call", id: "object:1", topic: "forward", method: "submit" } as const;
    const draft = { type: "input", content: "from the phone", requestId: "phone-1" };
    // Sent twice (the object resends until answered): one submission.
    toTab(encodeFollowMessage({ ...forward, args: [root.id, draft] }));
    toTab(encodeFollowMessage({ ...forward, args: [root.id, draft] }));
    await expect.poll(() => fromTab.filter((frame) => frame.includes('"object:1"')).length).toBe(2);
    const answers = fromTab.filter((frame) => frame.includes('"object:1"')).map((frame) => JSON.parse(frame));
    expect(answers.every((answer) => answer.type === "answer" && answer.value?.method === "submit")).toBe(true);
    expect(new Set(answers.map((answer) => answer.value.submissionId)).size).toBe(1);
    const submissions = await tab.query("SELECT COUNT(*) AS n FROM submissions");
    expect(submissions[0]!.n).toBe(1);
    follow.close();
    await tab.close(ctx);
  });

  it("0036: the tab's serverCalls ask the object's server-tools topic over the link and resolve with its answer", async () => {
    const { tab, end, follow, storage } = await tabAndObject();
    const asked: unknown[] = [];
    end.serve("server-tools", async (_method, args) => {
      asked.push(args[0]);
      return { result: { content: [{ type: "text", text: "charged 5" }], isError: false }, ending: "returned" };
    });
    const request = {
      place: "tab",
      epoch: tab.lease!.epoch,
      conversationId: 1,
      taskId: 2,
      callId: "call-1",
      tool: "charge",
      arguments: { amount: 5 },
      replay: "unsafe" as const,
    };
    await intentInCopy(storage, request); // the agent's own call, in the object's copy (decision 0051)
    const answer = await follow.serverCalls.call(request, ctx);
    expect(answer).toMatchObject({ ending: "returned", result: { content: [{ type: "text", text: "charged 5" }] } });
    expect(asked).toEqual([request]);
    follow.close();
    await tab.close(ctx);
  });
});

describe("a tab's worker that comes back follows the object (decision 0038)", () => {
  it("0038: after the page left, the worker's reopened harness is read-only and what the object commits reaches it live", async () => {
    const { tab, end, follow } = await tabAndObject();
    follow.leave();
    await expect.poll(() => end.harness !== undefined).toBe(true);
    const object = (await end.harness)!;
    await expect.poll(() => object.lease?.epoch).toBe(2);
    const back = await Harness.open(tab.storage, { registry: createRegistry(), lease: follow.lease }, ctx);
    expect(back.readOnly).toBe(true);
    follow.attach(back);
    expect(follow.place).toBe("elsewhere");
    await (await object.root(ctx)).commit((tx) => tx.setDocument("notes", "from-object", 1), ctx);
    await expect.poll(async () => (await back.query("SELECT COUNT(*) AS n FROM documents WHERE key = 'from-object'"))[0]!.n).toBe(1);
    follow.close();
    await object.close(ctx);
  });
});

describe("the object's end answers a call once (decision 0031)", () => {
  it("0031: a call resent while it is still being answered gets one answer, on the connection that asked last", async () => {
    const clock = createManualClock(1_000);
    const { end, book, storage } = await memoryObjectEnd(clock);
    await holds(book, "tab");
    let finish!: () => void;
    const running = new Promise<void>((resolve) => {
      finish = resolve;
    });
    let runs = 0;
    end.serve("server-tools", async () => {
      runs++;
      await running;
      return { result: { content: [{ type: "text", text: "done" }], isError: false }, ending: "returned" };
    });
    const request = { place: "tab", epoch: 1, conversationId: 1, taskId: 2, callId: "c", tool: "t", arguments: {}, replay: "safe" };
    await intentInCopy(storage, request as AskedCall);
    const frame = encodeFollowMessage({ type: "call", id: "tab:1", topic: "server-tools", method: "call", args: [request] });
    const first: string[] = [];
    const second: string[] = [];
    const asked = [
      end.receive(
        frame,
        (f) => first.push(f),
        () => true,
      ),
    ];
    for (let i = 0; i < 5; i++)
      asked.push(
        end.receive(
          frame,
          (f) => first.push(f),
          () => true,
        ),
      );
    asked.push(
      end.receive(
        frame,
        (f) => second.push(f),
        () => true,
      ),
    ); // the tab reconnected and asked again
    await expect.poll(() => runs).toBe(1);
    finish();
    await Promise.all(asked);
    expect(first).toEqual([]);
    expect(second).toHaveLength(1);
    expect(JSON.parse(second[0]!)).toMatchObject({ type: "answer", id: "tab:1", value: { ending: "returned" } });
    // Asked again after it was answered: the remembered answer, once more, and the tool not run again.
    await end.receive(
      frame,
      (f) => first.push(f),
      () => true,
    );
    expect(first).toHaveLength(1);
    expect(runs).toBe(1);
  });
});

/** Lets every queued microtask run, and no macrotask: what a worker does within one task. */
async function withinThisTask(): Promise<void> {
  for (let turn = 0; turn < 2_000; turn++) await Promise.resolve();
}

describe("a leaving page's worker sends its release in the task the page's word gave it (decisions 0035, 0100)", () => {
  it("S4/0100: a transaction whose storage operation waits for the event loop to turn (the starvation wait) is stored and the release sent in the leave's own task, with no macrotask in between", async () => {
    const { tab, end, follow, fromTab } = await tabAndObject();
    const root = await tab.root(ctx, { agent: { model: "faux/faux-1" } });
    await root.commit((tx) => tx.setDocument("notes", "before", 1), ctx);
    await expect.poll(() => fromTab.filter((frame) => frame.includes('"before"')).length).toBeGreaterThan(0);
    const real = performance.now.bind(performance);
    let shift = 0;
    const now = vi.spyOn(performance, "now").mockImplementation(() => real() + shift);
    try {
      eventLoopStarved(); // the probe is set now (or was): the loop has not turned since
      shift = 1_000; // as if the worker had run 1 s without its loop turning (a loaded machine): the next operation waits a macrotask
      const stored = root.commit((tx) => tx.setDocument("notes", "cut", 1), ctx);
      void follow.leave();
      await withinThisTask();
      const frames = fromTab.map((frame) => JSON.parse(frame) as { type: string; position?: number });
      const release = frames.find((frame) => frame.type === "release");
      expect(release, "the release left within the leave's task").toBeDefined();
      // Released at the head, the transaction that waited included, and its push sent before the release.
      await stored; // stored, not refused: it was on the line before the hand-over gave up writing
      const pushed = frames
        .filter((frame) => frame.type === "push")
        .flatMap((frame) => (frame as unknown as { batches: Array<{ fence: { position: number } }> }).batches);
      expect(release!.position).toBe(Math.max(...pushed.map((batch) => batch.fence.position)));
      expect(fromTab.findIndex((frame) => frame.includes('"cut"'))).toBeLessThan(fromTab.findIndex((frame) => frame.includes('"release"')));
    } finally {
      now.mockRestore();
    }
    await expect.poll(() => end.harness !== undefined).toBe(true);
    const object = (await end.harness)!;
    await expect.poll(() => object.lease?.epoch).toBe(2); // the object took the lease at that release
    follow.close();
    await object.close(ctx);
  });
});
