import { describe, expect, it } from "vitest";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { encodeFollowMessage } from "../src/follow/wire.ts";
import { createRegistry, defineExtension, definePageTool, Harness, type Storage, type ToolResultEntryPayload } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { answer, callTool, ScriptedModels, until } from "./agent-support.ts";
import { ctx } from "./support.ts";

// Decision 0051 (issue 27, decision 0044's seam): a page tool call claimed through a follow link did not survive a
// new instance of the object. The open releases the claims of pages not connected, and only page sockets counted: a
// follow socket that outlived the instance (a hibernation) was no proof for its pages, so the call was interrupted
// mid-run and the page's answer refused. Now the object tells the platform which pages claimed through each
// connection (`claimedPages`, kept in a follow socket's attachment); the next instance opens with them connected and
// gets them back (`restorePages`), so the claim lives as long as the socket.

const askPerson = definePageTool({
  name: "ask_person",
  description: "Ask the person in the page",
  parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
  replay: "unsafe",
});

async function objectWorld() {
  const models = new ScriptedModels([callTool("ask_person", { question: "Which colour?" }, "call_1"), answer("thanks")]);
  const registry = createRegistry().install(defineExtension({ name: "page", tools: [askPerson] }));
  const storage = await openSqliteStorage({ vfs: "memory" });
  let record: LeaseRecord = { epoch: 0, releasedAt: 0 };
  const clock = { now: () => Date.now(), setTimer: (ms: number, fire: () => void) => clearTimeout.bind(null, setTimeout(fire, ms)) };
  /** What the platform keeps with each connection (a follow socket's attachment), across instances. */
  const kept = new Map<unknown, readonly string[]>();
  /** One instance of the object: its end, opened with the pages kept with connections still open. */
  const instance = async () => {
    const connected = [...kept.values()].flat();
    const end = await ObjectEnd.start({
      place: "object",
      storage,
      book: new LeaseBook({ clock, ttlMs: 60_000, load: () => record, save: (next) => void (record = next) }),
      clock,
      open: (opened: Storage, lease) =>
        Harness.open(opened, { registry, models: models.api, lease, resume: true, connectedPages: connected }, ctx),
      claimedPages: (connection, pages) => void kept.set(connection, pages),
    });
    for (const [connection, pages] of kept) end.restorePages(connection, pages);
    return { end, harness: (await end.harness)! };
  };
  const call = async (end: ObjectEnd, connection: object, id: string, method: string, args: unknown[]) => {
    const replies: Array<{ id: string; value?: unknown; error?: { name: string } }> = [];
    await end.receive(
      encodeFollowMessage({ type: "call", id, topic: "page-calls", method, args: args as never }),
      (frame) => void replies.push(JSON.parse(frame)),
      () => true,
      connection,
    );
    await until(() => replies.length === 1, `the answer to ${method}`);
    return replies[0]!;
  };
  return { instance, call, kept };
}

async function claimedThenNewInstance() {
  const world = await objectWorld();
  const first = await world.instance();
  const root = await first.harness.root(ctx, { agent: { model: "faux/faux-1" } });
  await root.submit({ type: "input", content: "ask me", requestId: "q" }, ctx);
  await until(() => root.pendingPageCalls().length === 1, "the call waits for a page at the object");
  const socket = {}; // the tab's follow socket: it outlives the instance
  const claim = await world.call(first.end, socket, "c1", "claimPageCall", [root.id, "call_1", { claimId: "k", pageId: "page-1" }]);
  expect(claim.value).toMatchObject({ callId: "call_1", claimId: "k" });
  expect(world.kept.get(socket)).toEqual(["page-1"]);
  // The instance goes (its memory with it); the socket stays open; a new instance starts on the same storage.
  await first.harness.close(ctx);
  const second = await world.instance();
  return { world, second, socket, rootId: root.id };
}

describe("claims through a follow socket outlive the object's instance (decision 0051)", () => {
  it("0051 §4c S8: a page's claim made through a follow socket survives a new instance: the call stays claimed and the page's answer is its one result", async () => {
    const { world, second, socket, rootId } = await claimedThenNewInstance();
    const root = second.harness.conversation(rootId);
    expect(root.pendingPageCalls()).toMatchObject([{ callId: "call_1", status: "claimed" }]); // before: interrupted by the open
    const answered = await world.call(second.end, socket, "a1", "answerPageCall", [rootId, "call_1", "k", "green"]);
    expect(answered.error).toBeUndefined();
    await until(
      async () =>
        (await root.entriesBefore(Number.MAX_SAFE_INTEGER, 100, ctx)).entries.some(
          (entry) => entry.kind === "pi.assistant" && JSON.stringify(entry.payload).includes("thanks"),
        ),
      "the turn ends",
    );
    const results = (await root.entriesBefore(Number.MAX_SAFE_INTEGER, 100, ctx)).entries
      .filter((entry) => entry.kind === "pi.tool-result")
      .map((entry) => entry.payload as unknown as ToolResultEntryPayload);
    expect(results).toHaveLength(1);
    expect(JSON.stringify(results[0])).toContain("green");
    await second.harness.close(ctx);
  });

  it("0051 S8: the socket that outlived the instance closes: the new instance releases the claim it restored (interrupted, once); a late answer commits nothing", async () => {
    const { world, second, socket, rootId } = await claimedThenNewInstance();
    const root = second.harness.conversation(rootId);
    second.end.drop(socket);
    // The call leaves the pending list before its interrupted result is committed: wait for the result itself.
    const toolResults = async () =>
      (await root.entriesBefore(Number.MAX_SAFE_INTEGER, 100, ctx)).entries.filter((entry) => entry.kind === "pi.tool-result");
    await until(
      async () => root.pendingPageCalls().length === 0 && (await toolResults()).length > 0,
      "the claim released and the call ended",
    );
    const late = await world.call(second.end, socket, "a2", "answerPageCall", [rootId, "call_1", "k", "green"]);
    expect(late.error).toBeDefined();
    const results = await toolResults();
    expect(results).toHaveLength(1);
    expect(JSON.stringify(results[0]!.payload)).not.toContain("green");
    await second.harness.close(ctx);
  });
});
