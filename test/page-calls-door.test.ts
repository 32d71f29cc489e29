import { describe, expect, it } from "vitest";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import type { FollowAction, FollowRequest } from "../src/follow/object-end-options.ts";
import { encodeFollowMessage } from "../src/follow/wire.ts";
import { createRegistry, defineExtension, definePageTool, Harness, type Storage } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { callTool, ScriptedModels, until } from "./agent-support.ts";
import { ctx } from "./support.ts";

// Decision 0051: the follow door of page calls (decision 0044) is told the conversation of the page call — read in the
// harness that holds the lease, never taken from the caller — and the place the connection follows as, so an app can
// grant a caller page calls of its own conversations only.

const askPerson = definePageTool({
  name: "ask_person",
  description: "Ask the person in the page",
  parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
  replay: "unsafe",
});

async function objectAsks() {
  const models = new ScriptedModels([callTool("ask_person", { question: "Which colour?" }, "call_1")]);
  let record: LeaseRecord = { epoch: 0, releasedAt: 0 };
  const book = new LeaseBook({ clock: { now: () => Date.now() }, ttlMs: 60_000, load: () => record, save: (next) => void (record = next) });
  const end = await ObjectEnd.start({
    place: "object",
    storage: await openSqliteStorage({ vfs: "memory" }),
    book,
    clock: { now: () => Date.now(), setTimer: (ms, fire) => clearTimeout.bind(null, setTimeout(fire, ms)) },
    open: (storage: Storage, lease) =>
      Harness.open(
        storage,
        {
          registry: createRegistry().install(defineExtension({ name: "page", tools: [askPerson] })),
          models: models.api,
          lease,
          resume: true,
        },
        ctx,
      ),
  });
  const object = (await end.harness)!;
  const root = await object.root(ctx, { agent: { model: "faux/faux-1" } });
  const other = await object.createConversation({}, ctx); // a conversation of someone else's
  await root.submit({ type: "input", content: "ask me", requestId: "q" }, ctx);
  await until(() => root.pendingPageCalls().length === 1, "the call waits for a page at the object");
  return { end, object, root, other };
}

/** Sends `frames` on one connection under `door`, resolves with the answers by id. */
async function ask(end: ObjectEnd, door: (action: FollowAction, place?: string, request?: FollowRequest) => boolean, frames: string[]) {
  const replies: Array<{ id?: string; error?: { name: string }; value?: unknown }> = [];
  const connection = {};
  for (const frame of frames) {
    const seen = replies.length;
    await end.receive(frame, (reply) => void replies.push(JSON.parse(reply)), door, connection);
    await until(() => replies.length > seen, "an answer");
  }
  return replies;
}

const claim = (id: string, conversationId: number, claimId = "c1") =>
  encodeFollowMessage({
    type: "call",
    id,
    topic: "page-calls",
    method: "claimPageCall",
    args: [conversationId, "call_1", { claimId, pageId: "p" }],
  });

describe("the page-calls door knows the call's conversation and place (decision 0051)", () => {
  it("0051 S8: an app that grants a caller only another conversation refuses its claim of this one's page call — named truly or falsely — and nothing changes; granted, the claim is made", async () => {
    const world = await objectAsks();
    const seen: Array<[string, string | undefined, FollowRequest | undefined]> = [];
    const grants = (granted: number) => (action: FollowAction, place?: string, request?: FollowRequest) => {
      seen.push([action, place, request]);
      if (action.startsWith("follow.")) return place === "tab-a";
      return action.startsWith("page-calls.") && place === "tab-a" && request?.conversationId === granted;
    };
    const before = JSON.stringify(await world.object.storage.load());
    const follow = encodeFollowMessage({ type: "call", id: "f", topic: "follow", method: "from", args: ["tab-a", 0] });
    // Granted only `other`: the claim naming the call's own conversation, and one naming `other` (where there is no
    // such call: the caller's word is not taken), are both refused.
    const refused = await ask(world.end, grants(world.other.id), [follow, claim("h1", world.root.id), claim("h2", world.other.id)]);
    expect(refused.find((a) => a.id === "h1")?.error?.name).toBe("NotAuthorized");
    expect(refused.find((a) => a.id === "h2")?.error?.name).toBe("NotAuthorized");
    expect(seen.filter(([action]) => action === "page-calls.claimPageCall")).toEqual([
      ["page-calls.claimPageCall", "tab-a", { conversationId: world.root.id }],
      ["page-calls.claimPageCall", "tab-a", {}],
    ]);
    expect(JSON.stringify(await world.object.storage.load())).toBe(before);
    expect(world.root.pendingPageCalls()).toMatchObject([{ callId: "call_1", status: "waiting" }]);
    // Granted the call's conversation: the claim is made at the object.
    const granted = await ask(world.end, grants(world.root.id), [follow, claim("h3", world.root.id)]);
    expect(granted.find((a) => a.id === "h3")).toMatchObject({ value: { callId: "call_1", claimId: "c1" } });
    expect(world.root.pendingPageCalls()).toMatchObject([{ callId: "call_1", status: "claimed" }]);
    await world.object.close(ctx);
  });

  it("0051: a connection that never named a place gets no place at the page-calls door", async () => {
    const world = await objectAsks();
    const seen: Array<[string, string | undefined, FollowRequest | undefined]> = [];
    const replies = await ask(
      world.end,
      (action, place, request) => {
        seen.push([action, place, request]);
        return place !== undefined;
      },
      [claim("h1", world.root.id)],
    );
    expect(replies[0]?.error?.name).toBe("NotAuthorized");
    expect(seen).toEqual([["page-calls.claimPageCall", undefined, { conversationId: world.root.id }]]);
    expect(world.root.pendingPageCalls()).toMatchObject([{ callId: "call_1", status: "waiting" }]);
    await world.object.close(ctx);
  });
});
