import { describe, expect, it } from "vitest";
import { followObject } from "../src/browser/follow.ts";
import type { SocketLike } from "../src/browser/socket.ts";
import { createRegistry, Harness } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { until } from "./agent-support.ts";
import { memoryObjectEnd } from "./follow-support.ts";
import { ctx } from "./support.ts";

// Decision 0051 (issue 27): a staying page's `client.leave()` waited for the object's `taken` for ever when the link
// dropped for good after the hand-over went out (the object still takes the lease at its expiry). Now it settles with
// `HandOverUnanswered` once the link is down past the lease's expiry; an answer that comes in time still resolves true.

/** A tab (real followObject + Harness under its lease) on an in-memory socket to a real ObjectEnd; `cut()` drops it for good. */
async function tab() {
  const clock = createManualClock(1_000);
  const { end, record } = await memoryObjectEnd(clock);
  let cut = false;
  const listeners: Record<string, Array<(event?: { data: unknown }) => void>> = { open: [], message: [], close: [], error: [] };
  let first = true;
  const connect = (): SocketLike => {
    // After the cut, reconnections never open.
    if (!first) return { send() {}, close() {}, addEventListener() {} } as unknown as SocketLike;
    first = false;
    setTimeout(() => {
      for (const listener of listeners.open!) listener();
    }, 0);
    return {
      send(frame: string) {
        if (!cut)
          setTimeout(
            () =>
              void end.receive(
                frame,
                (reply) =>
                  setTimeout(() => {
                    if (cut) return;
                    for (const listener of listeners.message!) listener({ data: reply });
                  }, 0),
                () => true,
              ),
            0,
          );
      },
      close() {},
      addEventListener(type: string, listener: (event?: { data: unknown }) => void) {
        listeners[type]!.push(listener);
      },
    } as unknown as SocketLike;
  };
  const follow = followObject({ url: "ws://object/follow", connect }, clock);
  const harness = await Harness.open(
    await openSqliteStorage({ vfs: "memory" }),
    { registry: createRegistry(), clock, lease: follow.lease },
    ctx,
  );
  follow.attach(harness);
  expect(harness.readOnly).toBe(false);
  /** The link drops for good: nothing more reaches the object or the tab, the socket closes. */
  const drop = () => {
    cut = true;
    for (const listener of listeners.close!) listener();
  };
  return { clock, end, record, follow, harness, drop, cut: () => void (cut = true) };
}

describe("leave() settles when its answer never comes (decision 0051)", () => {
  it("0051: the hand-over went out, then the link dropped for good: leave() rejects with HandOverUnanswered once the lease's expiry passed, not before", async () => {
    const t = await tab();
    t.cut(); // the frames of the hand-over go nowhere (the object never answers)
    let outcome: unknown;
    const leaving = t.follow.leave().then(
      (value) => (outcome = value),
      (error: unknown) => (outcome = error),
    );
    await new Promise((resolve) => setTimeout(resolve, 10));
    t.drop();
    t.clock.advance(10_000);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(outcome).toBeUndefined(); // the lease (60 s) has not expired: the object may still answer
    t.clock.advance(60_000);
    await until(() => outcome !== undefined, "leave settles"); // before: never settled
    expect(outcome).toMatchObject({ name: "HandOverUnanswered" });
    await leaving;
    t.follow.close();
  });

  it("0051: a leave the object answers in time still resolves true and the object holds the lease", async () => {
    const answered = await tab();
    await expect(answered.follow.leave()).resolves.toBe(true);
    expect(answered.record().holder).toBe("object");
    answered.follow.close();
  });
});
