import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Feed } from "../src/follow/feed.ts";
import type { LoggedBatch } from "../src/follow/handover.ts";
import type { Harness } from "../src/harness.ts";
import { MemoryStorage } from "../src/storage/memory.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { emptyBatch } from "../src/testing/storage-conformance.ts";

// Review (session 8), decision 0038's feed: a round of the object's pushes to a following tab that takes several
// frames (transactions of hundreds of KB each: one frame holds about 1 MB) is answered by the tab after each frame
// (the follower acknowledges every push it applied). The feed took every such `ack` as "the round arrived or
// stopped at a gap" and started another round from there while the rest of the round was still on its way: on a
// lossless link each transaction went to the tab again and again (40 transactions of 300 KB: about 20 times the
// bytes of the stretch), and a flood of acks made the object read and send its tail once per ack.

/** An object's copy whose tail holds `count` transactions of about `bytes` each (epoch 2, positions 1..count). */
async function tailOf(count: number, bytes: number): Promise<MemoryStorage> {
  const storage = new MemoryStorage();
  for (let position = 1; position <= count; position++)
    await storage.apply({
      ...emptyBatch(),
      fence: { epoch: 2, position },
      documents: [{ scope: "s", key: `k${position}`, value: "x".repeat(bytes) }],
    });
  return storage;
}

/** The harness the feed is attached to: it holds the lease at `position` and stores nothing more. */
const holder = (position: number) => ({ lease: { place: "object", epoch: 2, position }, onLog: () => () => {} }) as unknown as Harness;

/**
 * A tab that follows: applies each push's whole transactions that continue its head (as `Follower` does) and
 * acknowledges its head after each push. Returns how many transactions it was sent in all.
 */
function followingTab(feed: Feed, connection: object, start: number, lose: (frame: number) => boolean = () => false) {
  const seen = { sent: 0, frames: 0, head: start };
  const send = (frame: string) => {
    const index = seen.frames++;
    const push = JSON.parse(frame) as { batches: Array<{ fence: { position: number } }> };
    seen.sent += push.batches.length;
    if (lose(index)) return;
    // The answer comes back later, each frame in its own turn, as over a socket.
    setTimeout(() => {
      for (const batch of push.batches.sort((a, b) => a.fence.position - b.fence.position))
        if (batch.fence.position === seen.head + 1) seen.head++;
      feed.ack(connection, send, seen.head);
    }, 0);
  };
  feed.follow(connection, send, start);
  return seen;
}

const settle = async () => {
  for (let turn = 0; turn < 100; turn++) await new Promise((resolve) => setTimeout(resolve, 0));
};

describe("the object's feed sends a round once, whatever acks come back while it is on its way (decision 0038, review)", () => {
  it("40 transactions of 300 KB to a tab that follows from 0 over a lossless link: each sent once, the tab reaches the head", async () => {
    const clock = createManualClock(1_000);
    const storage = await tailOf(40, 300_000);
    const feed = new Feed({ place: "object", storage, clock });
    feed.attach(holder(40));
    const tab = followingTab(feed, {}, 0);
    await settle();
    expect(tab.head).toBe(40);
    expect(tab.sent).toBe(40);
  });

  it("property: with up to four frames lost anywhere, the tab reaches the head; with none lost, nothing is sent twice (fast-check)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 12 }),
        fc.uniqueArray(fc.integer({ min: 0, max: 40 }), { maxLength: 4 }),
        async (count, losses) => {
          const clock = createManualClock(1_000);
          const storage = await tailOf(count, 300_000);
          const feed = new Feed({ place: "object", storage, clock, resendMs: 100 });
          feed.attach(holder(count));
          const tab = followingTab(feed, {}, 0, (frame) => losses.includes(frame));
          for (let round = 0; round < 40 && tab.head < count; round++) {
            await settle();
            clock.advance(100);
          }
          await settle();
          expect(tab.head).toBe(count);
          if (!losses.some((frame) => frame < tab.frames)) expect(tab.sent).toBe(count);
        },
      ),
      { numRuns: 15 },
    );
  });
});

describe("the feed sends a round a following tab lacks again and again, further and further apart (issue 27, decision 0038)", () => {
  /** A tab following from 0 a tail of three transactions over a link that loses the frames `lost` says. */
  async function lossyTab(lost: (frame: number) => boolean) {
    const clock = createManualClock(1_000);
    const storage = await tailOf(3, 100);
    const feed = new Feed({ place: "object", storage, clock, resendMs: 100 });
    feed.attach(holder(3));
    const sentAt: number[] = [];
    const tab = followingTab(feed, {}, 0, (frame) => {
      sentAt.push(clock.now());
      return lost(frame);
    });
    for (let turn = 0; turn < 40 && tab.head < 3; turn++) {
      await settle();
      if (!clock.next()) break;
    }
    await settle();
    return { tab, clock, gaps: sentAt.slice(1).map((at, index) => at - sentAt[index]!) };
  }

  it("S12: its first eleven frames lost in a row (more than the five resends at resendMs), with no transaction after: the tab still reaches the head", async () => {
    const { tab, gaps } = await lossyTab((frame) => frame < 11);
    expect(tab.head).toBe(3); // before: 0 (the feed gave up after five resends)
    expect(gaps).toEqual([100, 100, 100, 100, 100, 200, 400, 800, 1_600, 3_200, 3_200]);
  });

  it("a link that loses every frame: eleven resends, then no timer is left (a Durable Object may hibernate)", async () => {
    const { tab, clock, gaps } = await lossyTab(() => true);
    expect(tab.head).toBe(0);
    expect(gaps).toHaveLength(11);
    expect(clock.pending).toBe(0);
  });
});

describe("the feed's memory is bounded by bytes as well as by count (decision 0053)", () => {
  it("a tab 30 transactions of 500 KB behind, within the 256 buffered: its first round carries at most roundBytes and one transaction, and it still reaches the head", async () => {
    const clock = createManualClock(1_000);
    const count = 40;
    const bytes = 500_000;
    const roundBytes = 2_000_000;
    const storage = await tailOf(count, bytes);
    const feed = new Feed({ place: "object", storage, clock, roundBytes });
    // The harness stores each transaction live (its log listener), as an object under load does.
    let stored: ((batch: LoggedBatch) => void) | undefined;
    feed.attach({
      lease: { place: "object", epoch: 2, position: 0 },
      onLog: (listener: (batch: LoggedBatch) => void) => {
        stored = listener;
        return () => {};
      },
    } as unknown as Harness);
    for (const batch of await storage.readLog(0, count)) stored!(batch);
    const rounds: number[] = [];
    let head = 10;
    let acking = false;
    const connection = {};
    const send = (frame: string) => {
      const push = JSON.parse(frame) as { batches: LoggedBatch[] };
      if (!acking) rounds.push(frame.length);
      for (const batch of push.batches.sort((a, b) => a.fence.position - b.fence.position)) if (batch.fence.position === head + 1) head++;
      setTimeout(() => {
        acking = true;
        feed.ack(connection, send, head);
      }, 0);
    };
    feed.follow(connection, send, head);
    await settle();
    // Old code: the 30 were served from memory at once, 15 MB in the first round's frames.
    const firstRound = rounds.reduce((sum, length) => sum + length, 0);
    expect(firstRound).toBeLessThanOrEqual(roundBytes + bytes + 10_000);
    for (let turn = 0; turn < 20 && head < count; turn++) await settle();
    expect(head).toBe(count);
  });
});
