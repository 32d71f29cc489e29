import { describe, expect, it } from "vitest";
import { counterTask } from "../examples/counter-task.ts";
import type { Clock } from "../src/base/clock.ts";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { createRegistry, Harness, MemoryStorage } from "../src/index.ts";
import { Fence } from "../src/session/fence.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { ctx } from "./support.ts";

// Decision 0113, after review: the harness's side of the page's word (`Harness.leaving`) — a pinned lease is not
// ended by it, a non-finite end is refused, the lease-ending timer arms again when the clock reads early, and it is
// one timer at a time, cancelled on close.

/** A manual clock whose reads can be stepped back (`skew`), counting the timers armed and not yet fired or cancelled. */
function skewedClock(start: number) {
  const manual = createManualClock(start);
  const live = new Set<object>();
  const state = { skew: 0 };
  const clock: Clock = {
    now: () => manual.now() - state.skew,
    setTimer(delayMs, fire, kind) {
      const timer = {};
      live.add(timer);
      const cancel = manual.setTimer(
        delayMs,
        () => {
          live.delete(timer);
          fire();
        },
        kind,
      );
      return () => {
        live.delete(timer);
        cancel();
      };
    },
  };
  return { clock, manual, state, live };
}

async function holder(ttlMs: number) {
  const c = skewedClock(1_000);
  let record: LeaseRecord = { epoch: 0 };
  const book = new LeaseBook({ clock: c.manual, ttlMs, load: () => record, save: (next) => void (record = next) });
  const lost: Error[] = [];
  const harness = await Harness.open(
    new MemoryStorage(),
    { registry: createRegistry(), clock: c.clock, lease: { place: "tab", arbiter: book }, onLeaseLost: (error) => void lost.push(error) },
    ctx,
  );
  return { ...c, book, record: () => record, lost, harness, epoch: harness.lease!.epoch };
}

describe("the harness after its page said it is leaving (S4, decision 0113 after review)", () => {
  it("S4: a pinned lease is not handed over by the page's word: the object's book keeps it whole and the tab's harness writes on", async () => {
    const t = await holder(Number.POSITIVE_INFINITY);
    const before = t.record();
    expect(before.holder).toBe("tab");
    await t.book.leaving("tab", t.epoch, t.harness.lease!.position); // answered, nothing shortened
    expect(t.record()).toEqual(before);
    t.manual.advance(60_000);
    expect(await t.book.acquire("object", 0).catch((error: Error) => error.name)).toBe("LeaseNotHeld");
    // The tab's own side: its fence does not end at the word either.
    expect(t.harness.leaving(t.epoch, t.clock.now())).toBe(false);
    t.manual.advance(5_000);
    const root = await t.harness.root(ctx);
    await root.commit(
      (tx) =>
        tx.createTask(
          counterTask(() => {}),
          { to: 1, everyMs: 1_000 },
        ),
      ctx,
    ); // stored after the word
    expect(t.lost).toEqual([]);
    expect(new Fence("tab", 1, undefined, Number.POSITIVE_INFINITY).leaving(1, 5_000)).toBe(false);
    await t.harness.close(ctx);
  });

  it("S4: Harness.leaving refuses an end that is not a finite number (InvalidArguments) and the lease still ends at a later good word", async () => {
    const t = await holder(60_000);
    for (const end of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY])
      expect(() => t.harness.leaving(t.epoch, end)).toThrow(expect.objectContaining({ name: "InvalidArguments" }));
    expect(t.harness.leaving(t.epoch, t.clock.now() + 1_000)).toBe(true);
    t.manual.advance(1_000);
    expect(t.lost.map((error) => error.name)).toEqual(["LeaseNotHeld"]);
    await t.harness.close(ctx).catch(() => {});
  });

  it("S4: the lease-ending timer arms again when the clock reads 1 ms before the end as it fires (a wall clock stepped back)", async () => {
    const t = await holder(60_000);
    const end = t.clock.now() + 1_000;
    expect(t.harness.leaving(t.epoch, end)).toBe(true);
    t.state.skew = 1; // the wall clock steps back 1 ms
    t.manual.advance(1_000); // the timer fires; the harness clock reads end - 1
    expect(t.lost).toEqual([]);
    t.manual.advance(1); // the re-armed timer: the clock reads the end now
    expect(t.lost.map((error) => error.name)).toEqual(["LeaseNotHeld"]);
    await t.harness.close(ctx).catch(() => {});
  });

  it("S4: one lease-ending timer at a time — a second word replaces the first's — and none left after close", async () => {
    const t = await holder(60_000);
    const armed = t.live.size; // the renewal's and whatever else the open armed
    expect(t.harness.leaving(t.epoch, t.clock.now() + 5_000)).toBe(true);
    expect(t.live.size).toBe(armed + 1);
    expect(t.harness.leaving(t.epoch, t.clock.now() + 3_000)).toBe(true);
    expect(t.live.size).toBe(armed + 1);
    await t.harness.close(ctx);
    expect(t.live.size).toBe(0);
    t.manual.advance(10_000);
    expect(t.lost).toEqual([]);
  });
});
