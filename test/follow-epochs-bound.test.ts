import { describe, expect, it } from "vitest";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { continuesHistory, findFork, historyWindow, type LogHistory, MAX_SENT_STRETCHES } from "../src/follow/fork.ts";
import { encodeFollowMessage, type FollowStart, followStart } from "../src/follow/wire.ts";
import { MemoryStorage } from "../src/storage/memory.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { until } from "./agent-support.ts";
import { servingEnd } from "./server-call-copy-support.ts";

// Decision 0051 (issue 27): `follow.from`'s answer carried every epoch stretch of the object's history. Each takeover
// (a hand-over, an expiry, a tab taking the lease back) starts one, so after tens of thousands of them the answer
// passed the link's 1 MB frame and no tab could follow any more. The tab now says where its log tail starts, and the
// answer carries only the stretches that cover [tail, head], at most MAX_SENT_STRETCHES.

const TAKEOVERS = 50_000;
const MB = 1024 * 1024;

/** `storage` gets transactions `from`..`to`, each under its own epoch (`epochOf(position)`): a takeover each. */
async function takeovers(storage: MemoryStorage, from: number, to: number, epochOf = (position: number) => position) {
  for (let position = from; position <= to; position++)
    await storage.apply({
      fence: { epoch: epochOf(position), position },
      tasks: [],
      conversations: [],
      entries: [],
      submissions: [],
      documents: [{ scope: "n", key: "last", value: position }],
    });
}

async function objectAfterTakeovers() {
  const storage = new MemoryStorage();
  await takeovers(storage, 1, TAKEOVERS);
  await storage.trimLog(TAKEOVERS - 100); // the object's own tail is trimmed (decision 0047)
  const clock = createManualClock(1_000);
  // Another tab holds the lease: this object only serves its copy.
  let record: LeaseRecord = { epoch: TAKEOVERS, holder: "tab-x", expiresAt: Number.MAX_SAFE_INTEGER };
  const book = new LeaseBook({ clock, ttlMs: 60_000, load: () => record, save: (next) => void (record = next) });
  const end = await servingEnd(storage, book, clock);
  /** `follow.from` as a tab asks it; resolves with the answer's frame (the feed's pushes that follow it aside). */
  const from = async (args: Array<string | number>) => {
    const frames: string[] = [];
    await end.receive(
      encodeFollowMessage({ type: "call", id: "f", topic: "follow", method: "from", args }),
      (frame) => void frames.push(frame),
      () => true,
      {},
    );
    const answer = () => frames.find((frame) => frame.startsWith('{"type":"answer"'));
    await until(() => answer() !== undefined, "the answer");
    return answer()!;
  };
  return { storage, end, from };
}

describe("follow.from's history is bounded (decision 0051)", () => {
  it("0051: after 50,000 takeovers a tab at the head is answered in one frame under 1 MB and continues the object's history", async () => {
    const world = await objectAfterTakeovers();
    const frame = await world.from(["tab", TAKEOVERS, TAKEOVERS - 10]);
    expect(frame.length).toBeLessThan(MB); // before: every stretch, ~1.5 MB, past the link's frame
    const start = (JSON.parse(frame) as { value: FollowStart }).value;
    expect(followStart(start, "answer")).toBeUndefined();
    expect(start.head).toEqual({ epoch: TAKEOVERS, position: TAKEOVERS });
    expect(start.epochs).toHaveLength(11);
    expect(continuesHistory({ head: start.head!, epochs: start.epochs }, { epoch: TAKEOVERS, position: TAKEOVERS })).toBe(true);
    expect(continuesHistory({ head: start.head!, epochs: start.epochs }, { epoch: TAKEOVERS - 1, position: TAKEOVERS })).toBe(false);
  });

  it("0051 (0032): a tab whose last transactions forked after 50,000 takeovers learns exactly which from the bounded answer", async () => {
    const world = await objectAfterTakeovers();
    // The tab's copy: the same history up to 49,997, then two transactions of its own under epoch 49,997 (it was
    // fenced while offline); its log tail starts at 49,990.
    const tab = new MemoryStorage();
    await takeovers(tab, 1, TAKEOVERS - 3);
    await takeovers(tab, TAKEOVERS - 2, TAKEOVERS - 1, () => TAKEOVERS - 3);
    await tab.trimLog(TAKEOVERS - 11);
    const frame = await world.from(["tab", TAKEOVERS - 1, TAKEOVERS - 10]);
    expect(frame.length).toBeLessThan(MB);
    const start = (JSON.parse(frame) as { value: FollowStart }).value;
    const theirs: LogHistory = { head: start.head!, epochs: start.epochs };
    expect(continuesHistory(theirs, { epoch: TAKEOVERS - 3, position: TAKEOVERS - 1 })).toBe(false);
    const fork = await findFork(tab, theirs);
    expect(fork?.transactions.map((transaction) => transaction.position)).toEqual([TAKEOVERS - 2, TAKEOVERS - 1]);
  });

  it("0051: a tab of the old wire (no tail) is answered the stretches up to its head, at most MAX_SENT_STRETCHES", async () => {
    const world = await objectAfterTakeovers();
    const frame = await world.from(["tab", TAKEOVERS]);
    expect(frame.length).toBeLessThan(MB);
    const start = (JSON.parse(frame) as { value: FollowStart }).value;
    expect(start.epochs).toHaveLength(MAX_SENT_STRETCHES);
    expect(start.epochs.at(-1)).toEqual({ epoch: TAKEOVERS, start: TAKEOVERS });
  });

  it("0051 (0032): a stale push after 50,000 takeovers is refused in one frame under 1 MB, with the newest stretches", async () => {
    const world = await objectAfterTakeovers();
    const frames: string[] = [];
    const late = {
      fence: { epoch: 1, position: TAKEOVERS + 1 },
      tasks: [],
      conversations: [],
      entries: [],
      submissions: [],
      documents: [],
    };
    await world.end.receive(
      encodeFollowMessage({ type: "push", from: "tab-x", epoch: 1, batches: [late], parts: [] }),
      (frame) => void frames.push(frame),
      () => true,
      {},
    );
    const refusal = JSON.parse(frames[0]!) as { type: string; error: { name: string }; epochs: Array<{ epoch: number; start: number }> };
    expect(refusal).toMatchObject({ type: "refused", error: { name: "StaleEpoch" } });
    expect(frames[0]!.length).toBeLessThan(MB); // before: every stretch, ~1.5 MB
    expect(refusal.epochs).toHaveLength(MAX_SENT_STRETCHES);
    expect(refusal.epochs.at(-1)).toEqual({ epoch: TAKEOVERS, start: TAKEOVERS });
  });

  it("historyWindow: the stretch in force at `from` and those starting up to `to`, newest MAX_SENT_STRETCHES", () => {
    const epochs = [
      { epoch: 1, start: 1 },
      { epoch: 3, start: 10 },
      { epoch: 4, start: 20 },
      { epoch: 7, start: 30 },
    ];
    expect(historyWindow(epochs, 15, 25)).toEqual([epochs[1], epochs[2]]);
    expect(historyWindow(epochs, 0, 5)).toEqual([epochs[0]]);
    expect(historyWindow(epochs, 30, 40)).toEqual([epochs[3]]);
    expect(historyWindow(epochs, 10, 10)).toEqual([epochs[1]]);
    expect(historyWindow([], 0, 10)).toEqual([]);
    const many = Array.from({ length: MAX_SENT_STRETCHES + 5 }, (_, i) => ({ epoch: i + 1, start: i + 1 }));
    expect(historyWindow(many, 1, many.length)).toEqual(many.slice(5));
  });
});
