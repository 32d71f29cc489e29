import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Json } from "../src/base/json.ts";
import { followObject } from "../src/browser/follow.ts";
import { LeaseBook, type LeaseRecord, memoryArbiter } from "../src/follow/arbiter.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { SERVER_TOOLS_TOPIC } from "../src/follow/server-call-messages.ts";
import { memoryServerCallStore } from "../src/follow/server-calls.ts";
import { encodeFollowMessage } from "../src/follow/wire.ts";
import { createRegistry, defineExtension, Harness, type Storage, type ToolResultEntryPayload } from "../src/index.ts";
import { MemoryStorage } from "../src/storage/memory.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { answer, callTool, ScriptedModels, until } from "./agent-support.ts";
import { socketTo } from "./page-tools-follow-support.ts";
import { type AskedCall, chargeTool, intentInCopy, serveCharge, servingEnd } from "./server-call-copy-support.ts";
import { ctx } from "./support.ts";

// Decision 0051 (issue 27, decision 0036's seam): the lease holder could ask the object for any server tool with any
// arguments over `server-tools.call` — the object ran whatever a holder's tab sent, with the object's secrets. Now the
// call must be one of the agent's own in the object's copy of the holder's log: a `pi.tool` task of that conversation
// in its `server` phase, for the same call id, tool, replay and final arguments. Otherwise `ServerCallNotInCopy`,
// nothing run, nothing stored.

async function holderAndObject() {
  const clock = createManualClock(1_000);
  const book = memoryArbiter({ clock, ttlMs: 60_000 });
  const storage = new MemoryStorage();
  const end = await servingEnd(storage, book, clock);
  const runs: Json[] = [];
  const store = memoryServerCallStore();
  serveCharge(end, book, clock, chargeTool(runs, "unsafe"), store);
  const epoch = (await book.acquire("tab", 0)).epoch;
  let n = 0;
  const ask = async (request: unknown) => {
    const replies: Array<{ id: string; error?: { name: string; stack?: unknown }; value?: { ending?: string } }> = [];
    const id = `tab:${n++}`;
    await end.receive(
      encodeFollowMessage({ type: "call", id, topic: SERVER_TOOLS_TOPIC, method: "call", args: [request as never] }),
      (frame) => void replies.push(JSON.parse(frame)),
      () => true,
    );
    await until(() => replies.length === 1, "one answer");
    return replies[0]!;
  };
  return { end, storage, runs, store, epoch, ask };
}

const own: Omit<AskedCall, "epoch"> = {
  place: "tab",
  conversationId: 1,
  taskId: 7,
  callId: "call_7",
  tool: "charge",
  arguments: { amount: 5 },
  replay: "unsafe",
};

describe("a server tool runs only for a call of the object's copy (decision 0051, S8)", () => {
  it("0051 S8: the holder's call of a task in its server phase runs once; the same call id with another amount, tool or task, a task past its server phase, and a call the copy never had are ServerCallNotInCopy, nothing run or stored", async () => {
    const w = await holderAndObject();
    await intentInCopy(w.storage, own);
    await intentInCopy(
      w.storage,
      { ...own, taskId: 8, callId: "call_8" },
      { status: "running", checkpoint: { phase: "execute", arguments: own.arguments, replay: "unsafe" } },
    );
    const refusals = [
      { ...own, arguments: { amount: 5_000 } },
      { ...own, tool: "refund" },
      { ...own, replay: "safe" },
      { ...own, conversationId: 2 },
      { ...own, taskId: 8 },
      { ...own, taskId: 8, callId: "call_8" },
      { ...own, taskId: 99, callId: "call_99" },
    ];
    for (const forged of refusals) {
      const reply = await w.ask({ ...forged, epoch: w.epoch });
      expect(reply.error?.name).toBe("ServerCallNotInCopy");
    }
    expect(w.runs).toEqual([]); // before: [5000], the first forged call ran (and the rest were stored answers or refusals)
    expect(w.store.calls.size).toBe(0);
    expect((await w.ask({ ...own, epoch: w.epoch })).value?.ending).toBe("returned");
    expect(w.runs).toEqual([5]);
  });

  it("0051: a superseded epoch still hears StaleEpoch first (its tab must stop writing), not the copy's refusal", async () => {
    const w = await holderAndObject();
    const reply = await w.ask({ ...own, epoch: Math.max(w.epoch - 1, 1), place: "tab-b", taskId: 99 });
    expect(["StaleEpoch", "LeaseNotHeld"]).toContain(reply.error?.name);
    expect(w.store.calls.size).toBe(0);
  });

  it("property (0051, S8): random server-tools calls from the holder — random tasks, call ids, tools, arguments, replay — run nothing and store nothing unless they are exactly the copy's call; never a stack", async () => {
    const w = await holderAndObject();
    await intentInCopy(w.storage, own);
    const value = fc.oneof(fc.integer(), fc.string({ maxLength: 8 }), fc.boolean(), fc.constant(null));
    const call = fc.record({
      conversationId: fc.constantFrom(1, 2, 3),
      taskId: fc.constantFrom(7, 8, 1, 99),
      callId: fc.constantFrom("call_7", "call_8", "x", ""),
      tool: fc.constantFrom("charge", "refund", "Charge"),
      arguments: fc.oneof(fc.constant({ amount: 5 }), fc.dictionary(fc.constantFrom("amount", "to", "x"), value, { maxKeys: 3 })),
      replay: fc.constantFrom("safe", "unsafe"),
    });
    await fc.assert(
      fc.asyncProperty(call, async (asked) => {
        const exact =
          JSON.stringify({ ...asked }) ===
          JSON.stringify({ conversationId: 1, taskId: 7, callId: "call_7", tool: "charge", arguments: { amount: 5 }, replay: "unsafe" });
        fc.pre(!exact);
        const reply = await w.ask({ place: "tab", epoch: w.epoch, ...asked });
        // Refused at the wire (an empty call id) or by the copy.
        expect(["FollowMessageRefused", "ServerCallNotInCopy"]).toContain(reply.error?.name);
        expect(reply.error?.stack).toBeUndefined();
      }),
      { numRuns: 120 },
    );
    expect(w.runs).toEqual([]);
    expect(w.store.calls.size).toBe(0);
  });

  it("0051 (0032): a real tab's safe server tool call is asked after its intent is acknowledged, so the object's copy has it: it runs once and the model reads its result", async () => {
    const runs: Json[] = [];
    const models = new ScriptedModels([callTool("charge", { amount: 3 }, "call_1"), answer("paid")]);
    const registry = () => createRegistry().install(defineExtension({ name: "pay", tools: [chargeTool(runs, "safe")] }));
    let record: LeaseRecord = { epoch: 0 }; // no place holds it yet: the tab acquires it at its open
    const clock = { now: () => Date.now(), setTimer: (ms: number, fire: () => void) => clearTimeout.bind(null, setTimeout(fire, ms)) };
    const book = new LeaseBook({ clock, ttlMs: 60_000, load: () => record, save: (next) => void (record = next) });
    const objectRuns: Json[] = [];
    const end = await ObjectEnd.start({
      place: "object",
      storage: await openSqliteStorage({ vfs: "memory" }),
      book,
      clock,
      open: (storage: Storage, lease) => Harness.open(storage, { registry: registry(), models: models.api, lease, resume: true }, ctx),
    });
    serveCharge(end, book, clock, chargeTool(objectRuns, "safe"));
    const follow = followObject({ url: "ws://object/follow", connect: () => socketTo(end) });
    const tab = await Harness.open(
      await openSqliteStorage({ vfs: "memory" }),
      { registry: registry(), models: models.api, lease: follow.lease, serverCalls: follow.serverCalls },
      ctx,
    );
    follow.attach(tab);
    const root = await tab.root(ctx, { agent: { model: "faux/faux-1" } });
    const submission = await root.submit({ type: "input", content: "pay 3", requestId: "p" }, ctx);
    await submission.wait(ctx);
    const results = (await root.entriesBefore(Number.MAX_SAFE_INTEGER, 100, ctx)).entries
      .filter((entry) => entry.kind === "pi.tool-result")
      .map((entry) => entry.payload as unknown as ToolResultEntryPayload);
    expect(results).toHaveLength(1);
    expect(JSON.stringify(results[0])).toContain("charged 3");
    expect(objectRuns).toEqual([3]);
    expect(runs).toEqual([]);
    follow.close();
    await tab.close(ctx);
  });
});
