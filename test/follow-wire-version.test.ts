import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Json } from "../src/base/json.ts";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { FollowLink } from "../src/follow/link-client.ts";
import { remoteArbiter } from "../src/follow/mirror.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { encodeFollowMessage, FOLLOW_TOPICS, parseFollowMessage } from "../src/follow/wire.ts";
import { FOLLOW_WIRE_VERSION } from "../src/follow/wire-version.ts";

/** A wire version newer than this release's. */
const NEWER = FOLLOW_WIRE_VERSION + 1;

import { deserializeError } from "../src/host/error-wire.ts";
import { createRegistry, FollowMessageRefused, FollowVersionMismatch, Harness, MemoryStorage, type Storage } from "../src/index.ts";
import { createManualClock, type ManualClock } from "../src/testing/clock.ts";
import { ctx, flush, hostileJson } from "./support.ts";

// Decision 0046: a tab and a Worker deployed apart meet on the follow link. The tab's first call on a connection is
// `wire.hello(version)`; different versions fail at once, in both directions, with one typed error naming both —
// never a message the other side half understands (before: a Worker older than the tab refused `lease.acquire`'s
// third argument as a malformed frame, and a newer tab's open failed with that).

/**
 * An object's end in memory. `before: true` is an object deployed before the wire had versions: its link's topics
 * lack `wire`, so it refuses the hello exactly as such a Worker's parse does (`there is no call wire.hello`).
 */
async function objectEnd(clock: ManualClock, options: { before?: boolean } = {}) {
  let record: LeaseRecord = { epoch: 0 };
  const book = new LeaseBook({ clock, ttlMs: 60_000, load: () => record, save: (next) => void (record = next) });
  const { wire: _wire, ...before } = FOLLOW_TOPICS;
  const end = await ObjectEnd.start({
    place: "object",
    storage: new MemoryStorage(),
    book,
    clock,
    ...(options.before ? { topics: before } : {}),
    open: (storage: Storage, lease) => Harness.open(storage, { registry: createRegistry(), clock, lease }, ctx),
  });
  return { end, record: () => record };
}

/** A tab's link to `receive` (the object's side), frames delivered on a later turn; what the tab sent, in order. */
function tabLink(clock: ManualClock, receive: (frame: string, reply: (frame: string) => void) => unknown) {
  const sent: string[] = [];
  const mismatches: FollowVersionMismatch[] = [];
  const link: FollowLink = new FollowLink({
    clock,
    send: (frame) => {
      sent.push(frame);
      setTimeout(() => void receive(frame, (reply) => setTimeout(() => link.receive(reply), 0)), 0);
    },
    onMismatch: (error) => void mismatches.push(error),
  });
  link.connected();
  return { link, sent, mismatches };
}

/** What the object answered a raw frame a tab sent. */
async function answerTo(end: ObjectEnd, message: Json): Promise<Record<string, unknown>> {
  const replies: string[] = [];
  await end.receive(
    JSON.stringify(message),
    (frame) => void replies.push(frame),
    () => true,
  );
  expect(replies).toHaveLength(1);
  const parsed = parseFollowMessage(replies[0], "object");
  if ("error" in parsed) throw parsed.error;
  return parsed.message as unknown as Record<string, unknown>;
}

describe("the follow wire's version (decision 0046)", () => {
  it("0046: a tab and an object of one release: the hello goes first and is answered, then the lease is granted", async () => {
    const clock = createManualClock(1_000);
    const { end, record } = await objectEnd(clock);
    const { link, sent } = tabLink(clock, (frame, reply) => end.receive(frame, reply, () => true));
    const grant = await remoteArbiter(link).acquire("tab", 0);
    expect(grant.epoch).toBe(1);
    expect(record().holder).toBe("tab");
    const [first] = sent.map((frame) => JSON.parse(frame) as { topic?: string; method?: string; args?: Json[] });
    expect(first).toMatchObject({ type: "call", topic: "wire", method: "hello", args: [FOLLOW_WIRE_VERSION] });
  });

  it("0046: a tab of this release and a Worker deployed before versions: the tab's open fails with FollowVersionMismatch naming ours and 1; nothing but the hello was sent, nothing granted", async () => {
    const clock = createManualClock(1_000);
    const { end, record } = await objectEnd(clock, { before: true });
    const { link, sent, mismatches } = tabLink(clock, (frame, reply) => end.receive(frame, reply, () => true));
    const opened = Harness.open(
      new MemoryStorage(),
      { registry: createRegistry(), clock, lease: { place: "tab", arbiter: remoteArbiter(link) } },
      ctx,
    );
    const refused = await opened.then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(FollowVersionMismatch);
    expect(refused).toMatchObject({ tab: FOLLOW_WIRE_VERSION, object: 1 });
    expect((refused as Error).message).toContain(`version ${FOLLOW_WIRE_VERSION}`);
    expect((refused as Error).message).toContain("version 1");
    expect(mismatches).toHaveLength(1);
    expect(link.up).toBe(false);
    expect(sent.map((frame) => (JSON.parse(frame) as { topic?: string }).topic)).toEqual(["wire"]);
    expect(record()).toEqual({ epoch: 0 });
    // Every later call fails the same way at once, until the next connection says hello again.
    await expect(link.call("lease", "renew", ["tab", 1])).rejects.toBeInstanceOf(FollowVersionMismatch);
  });

  it("0046: a tab of this release and an object of a newer wire (it answers a version past ours): FollowVersionMismatch naming both", async () => {
    const clock = createManualClock(1_000);
    const { link } = tabLink(clock, (frame, reply) => {
      const { id } = JSON.parse(frame) as { id: string };
      reply(encodeFollowMessage({ type: "answer", id, value: { version: NEWER } }));
    });
    const refused = await link.call("lease", "acquire", ["tab", 0]).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(FollowVersionMismatch);
    expect(refused).toMatchObject({ tab: FOLLOW_WIRE_VERSION, object: NEWER });
  });

  it("0046: an object of this release and a tab of a newer wire (a hello past ours): the answer is FollowVersionMismatch naming both, and nothing is granted", async () => {
    const clock = createManualClock(1_000);
    const { end, record } = await objectEnd(clock);
    const answer = await answerTo(end, { type: "call", id: "h", topic: "wire", method: "hello", args: [NEWER] });
    const error = deserializeError(answer.error as never);
    expect(error).toBeInstanceOf(FollowVersionMismatch);
    expect(error).toMatchObject({ tab: NEWER, object: FOLLOW_WIRE_VERSION });
    expect(error.message).toContain(`version ${NEWER}`);
    expect(record()).toEqual({ epoch: 0 });
  });

  it("0046: an object of this release and a tab from before versions (it says no hello): served as wire version 1, its two-argument acquire granted", async () => {
    const clock = createManualClock(1_000);
    const { end, record } = await objectEnd(clock);
    const answer = await answerTo(end, { type: "call", id: "a", topic: "lease", method: "acquire", args: ["tab", 0] });
    expect(answer).toMatchObject({ type: "answer", id: "a", value: { epoch: 1 } });
    expect(record().holder).toBe("tab");
  });

  it("0046: a tab that meets a mismatch and reconnects to an object of its own version (the Worker deployed again) follows", async () => {
    const clock = createManualClock(1_000);
    const old = await objectEnd(clock, { before: true });
    const current = await objectEnd(clock);
    let to = old.end;
    const { link } = tabLink(clock, (frame, reply) => to.receive(frame, reply, () => true));
    await flush();
    expect(link.mismatch).toMatchObject({ tab: FOLLOW_WIRE_VERSION, object: 1 });
    to = current.end;
    link.disconnected();
    link.connected();
    expect((await remoteArbiter(link).acquire("tab", 0)).epoch).toBe(1);
    expect(link.mismatch).toBeUndefined();
  });

  it("0046: hostile hellos (any JSON as arguments) get a typed answer, never a grant", async () => {
    const clock = createManualClock(1_000);
    const { end, record } = await objectEnd(clock);
    await fc.assert(
      fc.asyncProperty(fc.array(hostileJson(3), { maxLength: 3 }), async (args) => {
        const answer = await answerTo(end, { type: "call", id: "h", topic: "wire", method: "hello", args: args as Json[] });
        if ("value" in answer) {
          expect(args).toEqual([FOLLOW_WIRE_VERSION]);
          expect(answer.value).toEqual({ version: FOLLOW_WIRE_VERSION });
        } else {
          const error = deserializeError(answer.error as never);
          expect(error instanceof FollowVersionMismatch || error instanceof FollowMessageRefused).toBe(true);
        }
      }),
      { numRuns: 150 },
    );
    expect(record()).toEqual({ epoch: 0 });
  });
});
