import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { LeaseNotHeld } from "../src/errors.ts";
import type { LeaseArbiter } from "../src/follow/arbiter.ts";
import type { LeaseHolder } from "../src/follow/wire.ts";
import { encodeFollowMessage, type FollowStart, followStart, parseFollowMessage } from "../src/follow/wire.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { followWorld } from "./follow-support.ts";
import { ctx, hostileJson, runUntil } from "./support.ts";

// Decision 0057 (issue 27): a tab that follows learnt the lease's epoch, never its holder, so the demo named "the
// Durable Object" whichever place held it — another of the user's tabs or devices too. The object now names the
// holder, from its own LeaseBook record (a place it granted the lease through its door, never a tab's own claim), in
// its `follow.from` answer and in every push; the host's ready status carries it as `heldBy` while the work runs
// elsewhere.

/** `follow.from` as a device asks it on its own connection; resolves with the answer's value and that connection's frames. */
async function askFrom(world: Awaited<ReturnType<typeof followWorld>>, place: string, frames: string[], head = 0) {
  const reply = (frame: string) => void frames.push(frame);
  const id = `from-${frames.length}`;
  await world.end.receive(
    encodeFollowMessage({ type: "call", id, topic: "follow", method: "from", args: [place, head] }),
    reply,
    () => true,
  );
  await runUntil(world.clock, () => frames.some((frame) => frame.includes(`"id":"${id}"`)));
  const answer = JSON.parse(frames.find((frame) => frame.includes(`"id":"${id}"`))!);
  expect(followStart(answer.value, "answer")).toBeUndefined();
  return answer.value as FollowStart;
}

describe("the lease's holder, as the object records it (decision 0057)", () => {
  it("0057: follow.from names the tab that holds the lease, and after its hand-over the object; the object's pushes name it too", async () => {
    const world = await followWorld({ to: 50 });
    world.tab.resume();
    await runUntil(world.clock, () => world.printed.length >= 2);
    const frames: string[] = [];
    expect((await askFrom(world, "phone", frames)).holder).toEqual({ place: "tab", object: false });
    // The tab hands the lease to the object, which counts on and pushes to the device that follows.
    const mark = await world.tab.handOver(ctx);
    await world.mirror.leave(mark, ctx);
    await runUntil(world.clock, () => world.end.harness !== undefined);
    const object = (await world.end.harness)!;
    // What the tab pushed while it held the lease was relayed to the device (decision 0090), naming the tab.
    // (Those it had not acknowledged by the takeover are pushed again from the feed's memory, decision 0094: the
    // object names itself in them, the holder when they are sent.)
    const relayed = frames.filter((frame) => frame.startsWith('{"type":"push"')).map((frame) => JSON.parse(frame));
    const firstByObject = relayed.findIndex((push) => push.holder.object);
    expect(firstByObject === -1 ? relayed.length : firstByObject).toBeGreaterThan(0);
    for (const push of relayed.slice(0, firstByObject === -1 ? undefined : firstByObject))
      expect(push.holder).toEqual({ place: "tab", object: false });
    for (const push of firstByObject === -1 ? [] : relayed.slice(firstByObject))
      expect(push.holder).toEqual({ place: "object", object: true });
    // The device follows from the object's head (it holds that much, say): the next steps are pushed to it.
    const asked = frames.length;
    expect((await askFrom(world, "phone", frames, world.end.head)).holder).toEqual({ place: "object", object: true });
    await runUntil(world.clock, () => frames.slice(asked).some((frame) => frame.startsWith('{"type":"push"')));
    const pushes = frames
      .slice(asked)
      .filter((frame) => frame.startsWith('{"type":"push"'))
      .map((frame) => JSON.parse(frame));
    for (const push of pushes) expect(push.holder).toEqual({ place: "object", object: true });
    // Checked where it arrives: an object's push with its holder parses.
    const parsed = parseFollowMessage(
      frames.slice(asked).find((frame) => frame.startsWith('{"type":"push"')),
      "object",
    );
    expect("message" in parsed && parsed.message.type === "push" && parsed.message.holder).toEqual({ place: "object", object: true });
    await object.close(ctx);
  });

  it("0057: the host's ready status names the holder (heldBy) while the work runs elsewhere, follows each change, and drops it when it runs here", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    const arbiter: LeaseArbiter = {
      acquire: async (place) => {
        throw new LeaseNotHeld(place, "tab-b holds it");
      },
      renew: async (place) => {
        throw new LeaseNotHeld(place, "tab-b holds it");
      },
      release: async () => {},
    };
    let tell: ((holder: LeaseHolder | undefined) => void) | undefined;
    const host = createHost({
      database: "tab",
      openStorage: async () => storage,
      harness: { registry: createRegistry(), lease: { place: "tab-a", arbiter } },
      onHolder: (listener) => void (tell = listener),
      now: () => 0,
    });
    await host.ready;
    expect(host.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
    expect(host.service.status()).not.toHaveProperty("heldBy");
    tell!({ place: "tab-b", object: false });
    expect(host.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere", heldBy: { kind: "tab", place: "tab-b" } });
    tell!({ place: "object", object: true });
    expect(host.service.status()).toMatchObject({ heldBy: { kind: "object", place: "object" } });
    tell!(undefined);
    expect(host.service.status()).not.toHaveProperty("heldBy");
    await host.service.close();
  });

  it("0057: a hostile holder in an object's frame is refused before anything acts on it; a tab may not name one (property)", () => {
    const valid = (value: unknown) =>
      typeof value === "object" &&
      value !== null &&
      !Array.isArray(value) &&
      Object.keys(value).length === 2 &&
      typeof (value as LeaseHolder).place === "string" &&
      (value as LeaseHolder).place.length > 0 &&
      (value as LeaseHolder).place.length <= 200 &&
      typeof (value as LeaseHolder).object === "boolean";
    const holder = fc.oneof(
      fc.record({ place: fc.string({ maxLength: 260 }), object: fc.boolean() }),
      fc.record({ place: fc.string({ minLength: 1, maxLength: 30 }), object: fc.anything() }),
      fc.record({ place: fc.anything(), object: fc.boolean(), extra: fc.anything() }, { requiredKeys: ["place"] }),
      fc.record({ place: hostileJson(1), object: hostileJson(1) }),
      fc.anything(),
    );
    fc.assert(
      fc.property(holder, (value) => {
        const push = { type: "push", from: "object", epoch: 2, batches: [], parts: [], holder: value };
        const fromObject = parseFollowMessage(JSON.stringify(push), "object");
        const fromTab = parseFollowMessage(JSON.stringify(push), "tab");
        const start = followStart(JSON.parse(JSON.stringify({ head: null, epochs: [], after: 0, holder: value })), "answer");
        const roundTripped = JSON.parse(JSON.stringify({ holder: value })).holder;
        const ok = roundTripped === undefined || valid(roundTripped);
        expect("message" in fromObject).toBe(ok);
        expect(start === undefined).toBe(ok);
        expect("message" in fromTab).toBe(roundTripped === undefined);
      }),
      { numRuns: 300 },
    );
  });
});
