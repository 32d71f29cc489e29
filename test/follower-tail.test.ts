import { describe, expect, it } from "vitest";
import { Follower } from "../src/follow/follower.ts";
import { findFork, MAX_SENT_STRETCHES } from "../src/follow/fork.ts";
import { remoteArbiter } from "../src/follow/mirror.ts";
import { createRegistry, Harness } from "../src/index.ts";
import { MemoryStorage } from "../src/storage/memory.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { linkToObject, servingObjectEnd } from "./follow-support.ts";
import { ctx, runUntil } from "./support.ts";

// Decision 0058 (issue 27): a following tab trimmed its log tail only when it applied a push. A tab that comes back
// with a tail it never saw acknowledged (its lease lapsed while its acks were lost) and finds it continues the
// object's history kept that tail for as long as no push came — possibly for good — and sent its start as `tail` on
// every reconnect. Past MAX_SENT_STRETCHES takeovers inside it, the bounded history (a refusal's, decision 0051) no
// longer covers its oldest positions, and they read as a fork that never was. Now the follower trims its tail to
// its head as soon as it knows its copy continues the object's: every position up to there is the object's.

const TAKEOVERS = MAX_SENT_STRETCHES + 900;

/** `storage` gets transactions 1..`to`, each under its own epoch: a takeover each. */
async function takeovers(storage: MemoryStorage, to: number) {
  for (let position = 1; position <= to; position++)
    await storage.apply({
      fence: { epoch: position, position },
      tasks: [],
      conversations: [],
      entries: [],
      submissions: [],
      documents: [{ scope: "n", key: "last", value: position }],
    });
}

async function followingTab() {
  const clock = createManualClock(1_000);
  const copy = new MemoryStorage();
  await takeovers(copy, TAKEOVERS);
  // Another tab holds the lease now: the object serves its copy.
  const end = await servingObjectEnd(copy, clock, TAKEOVERS);
  const asked: unknown[][] = [];
  const link = linkToObject(end, clock, (message) => {
    if (message.topic === "follow" && message.method === "from") asked.push(message.args!);
    return true;
  });
  link.connected();
  // The tab's copy holds the same history, its whole log tail still kept.
  const tab = new MemoryStorage();
  await takeovers(tab, TAKEOVERS);
  const harness = await Harness.open(
    tab,
    { registry: createRegistry(), clock, lease: { place: "tab", arbiter: remoteArbiter(link) } },
    ctx,
  );
  expect(harness.readOnly).toBe(true);
  const forks: unknown[] = [];
  const follower = new Follower({ harness, link, place: "tab", onForked: (theirs) => void forks.push(theirs) });
  await runUntil(clock, () => follower.following);
  return { clock, copy, tab, link, harness, follower, forks, asked };
}

describe("a following tab's own tail is bounded (decision 0058)", () => {
  it("0058 (0051, 0032): after more than MAX_SENT_STRETCHES takeovers, a tab that continues the object's history keeps no tail, and the newest stretches find no fork in it", async () => {
    const world = await followingTab();
    expect(world.forks).toEqual([]);
    expect(world.asked[0]).toEqual(["tab", TAKEOVERS, 1]); // it came back with its whole tail
    await runUntil(world.clock, async () => (await world.tab.readLog(0, 1)).length === 0, 100); // before: never
    // What a refusal carries after this many takeovers: the newest stretches only (decision 0051).
    const theirs = { head: { epoch: TAKEOVERS, position: TAKEOVERS }, epochs: (await world.copy.readEpochs()).slice(-MAX_SENT_STRETCHES) };
    expect(await findFork(world.tab, theirs)).toBeUndefined(); // before: positions 1..900 read as forked
    // At the next reconnect it says its tail starts at its head: one stretch is all it needs.
    const before = world.asked.length;
    world.link.disconnected();
    world.link.connected();
    await runUntil(world.clock, () => world.asked.length > before && world.follower.following);
    expect(world.asked.at(-1)).toEqual(["tab", TAKEOVERS, TAKEOVERS]);
    await world.harness.close(ctx);
  });
});
