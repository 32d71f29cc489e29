import { describe, expect, it } from "vitest";
import { Mirror } from "../src/follow/mirror.ts";
import { createManualClock } from "../src/testing/clock.ts";

// Review of decision 0122 (M1, older than it): a push round whose read of the durable tail rejected (the storage busy
// or failing) left the round in flight with no resend timer and the rejection unhandled — the mirror pushed nothing
// more, so a step waiting for the object's acknowledgement before an effect (S8) waited until the link reconnected.
// Now the resend reads the tail again.

const flush = async () => {
  for (let i = 0; i < 20; i++) await Promise.resolve();
};

const batchAt = (position: number) => ({
  fence: { epoch: 2, position },
  tasks: [],
  conversations: [],
  entries: [],
  submissions: [],
  documents: [],
});

describe("a mirror whose durable tail cannot be read once (review of 0122)", () => {
  it("S8/S12: the resend reads the tail again and pushes what is stored; nothing goes unhandled", async () => {
    const clock = createManualClock(0);
    const sent: Array<{ type?: string; batches?: unknown[] } | string> = [];
    const logListeners = new Set<(batch: unknown, text?: string) => void>();
    const tail = new Map<number, string>();
    let reads = 0;
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => void unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      const mirror = new Mirror({
        harness: {
          lease: { place: "tab", epoch: 2, position: 0 },
          onLog: (listener: never) => {
            logListeners.add(listener);
            return () => logListeners.delete(listener);
          },
          storage: {
            readLog: async (after: number) => {
              if (reads++ === 0) throw new Error("SQLITE_BUSY");
              return [...tail.entries()].filter(([position]) => position > after).map(([, text]) => JSON.parse(text));
            },
            trimLog: async () => {},
          },
        } as never,
        link: {
          up: true,
          send: (message: { type?: string }) => {
            sent.push(message);
            return 1;
          },
          sendEncoded: (frame: string) => {
            sent.push(frame);
            return 1;
          },
          onReply: () => () => {},
          onConnected: () => () => {},
        } as never,
        clock,
      });
      await flush(); // the first round (the object's head not heard yet) reads the tail: it rejects
      for (let position = 1; position <= 3; position++) {
        const batch = batchAt(position);
        tail.set(position, JSON.stringify(batch));
        for (const listener of logListeners) listener(batch, JSON.stringify(batch));
      }
      await flush();
      expect(sent).toEqual([]); // nothing pushed yet: the failed round is still in flight
      clock.advance(2_000); // the resend
      await flush();
      expect(reads).toBe(2); // before: 1 — no timer was armed, no round ever again
      const pushed = sent.map((one) => (typeof one === "string" ? JSON.parse(one) : one));
      expect(pushed.flatMap((one) => (one.type === "push" ? (one.batches ?? []) : []))).toHaveLength(3);
      expect(mirror.acknowledged).toBe(-1);
      mirror.stop();
      await new Promise((resolve) => setTimeout(resolve, 0));
      expect(unhandled.map(String)).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });
});
