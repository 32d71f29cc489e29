import { describe, expect, it } from "vitest";
import { Follower } from "../src/follow/follower.ts";
import { remoteArbiter } from "../src/follow/mirror.ts";
import { createRegistry, Harness } from "../src/index.ts";
import { MemoryStorage } from "../src/storage/memory.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { linkToObject, servingObjectEnd } from "./follow-support.ts";
import { ctx, runUntil } from "./support.ts";

// Issue 27 item 3 (decision 0038): a tab that follows asks the object where to start (`follow.from`). The call is
// sent again every 2 s and gives up after its 15 s timeout; the follower then waited for the next reconnect. On a
// link that stays up but loses that many frames (or an object that is that slow to answer), nothing asked again: the
// copy stood still for good while the object went on. Found by test/follow-back.test.ts's property (seed 1623942990)
// timing out in CI. Now a timed-out ask is asked again while the link is up.

async function positions(storage: MemoryStorage, to: number) {
  for (let position = 1; position <= to; position++)
    await storage.apply({
      fence: { epoch: 1, position },
      tasks: [],
      conversations: [],
      entries: [],
      submissions: [],
      documents: [{ scope: "n", key: "last", value: position }],
    });
}

describe("a follower whose first ask goes unanswered past the call's timeout (issue 27, decision 0038)", () => {
  it("S12: asks again while the link is up and then follows the object's copy to its head", async () => {
    const clock = createManualClock(1_000);
    const copy = new MemoryStorage();
    await positions(copy, 6);
    // Another tab holds the lease: the object serves its copy to this one.
    const end = await servingObjectEnd(copy, clock, 1);
    // The link loses the first ten `follow.from` frames (20 s of resends, past the 15 s timeout); all else arrives.
    let lost = 0;
    const asked: number[] = [];
    const link = linkToObject(end, clock, (message) => {
      if (message.topic !== "follow" || message.method !== "from") return true;
      asked.push(clock.now());
      return lost++ >= 10;
    });
    link.connected();
    const tab = new MemoryStorage();
    await positions(tab, 2);
    const harness = await Harness.open(
      tab,
      { registry: createRegistry(), clock, lease: { place: "tab", arbiter: remoteArbiter(link) } },
      ctx,
    );
    expect(harness.readOnly).toBe(true);
    const follower = new Follower({ harness, link, place: "tab" });
    await runUntil(clock, () => follower.following, 200); // before: never (the follower waited for a reconnect)
    expect(asked.length).toBe(11);
    expect(asked.at(-1)! - asked[0]!).toBeGreaterThanOrEqual(15_000); // the second ask came after the first timed out
    await runUntil(clock, () => follower.head === 6, 200);
    expect(await tab.getDocument("n", "last")).toBe(6);
    await harness.close(ctx);
  });
});
