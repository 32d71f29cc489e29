import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Json } from "../src/base/json.ts";
import { FollowMessageRefused, SnapshotPartsBusy, SnapshotUnavailable } from "../src/errors.ts";
import { fetchSnapshot, SnapshotServer } from "../src/follow/snapshot.ts";
import type { Storage } from "../src/storage/storage.ts";
import { createManualClock, type ManualClock } from "../src/testing/clock.ts";
import { copyAt } from "./snapshot-copy.ts";
import { ctx } from "./support.ts";

// Decision 0064 (issue 27 item 1): a tab reading a snapshot part by part met the object's parts limit (decision 0058)
// as `busy` and gave up the whole fetch; the app then asked for a new take, which counted against the take limit and
// could displace another caller's kept snapshot. Now a `busy` part is asked again after a bounded backoff on the
// harness clock, a `gone` part starts one new take, and spent retries end in SnapshotPartsBusy.

function served(clock: ManualClock, limits: ConstructorParameters<typeof SnapshotServer>[2]) {
  let reads = 0;
  const storage = { label: "object", readSnapshot: async () => copyAt(++reads) } as unknown as Storage;
  const server = new SnapshotServer(storage, clock, limits);
  const calls: Json[][] = [];
  const link = {
    call: async (_topic: string, _method: string, args: Json[]) => {
      calls.push(args);
      return (await server.part(args[1] as string | undefined, args[2] as number | undefined, args[0] as string)) as unknown as Json;
    },
  };
  return { link, calls, reads: () => reads, server };
}

/** Settles `promise`, moving the manual clock 250 ms whenever everything else has run (no real time is waited on). */
async function drive<T>(clock: ManualClock, promise: Promise<T>): Promise<{ value?: T; error?: unknown; clockMs: number }> {
  const start = clock.now();
  let outcome: { value?: T; error?: unknown } | undefined;
  promise.then(
    (value) => (outcome = { value }),
    (error: unknown) => (outcome = { error }),
  );
  for (let step = 0; step < 10_000 && !outcome; step++) {
    await new Promise((resolve) => setTimeout(resolve, 0));
    if (!outcome) clock.advance(250);
  }
  if (!outcome) throw new Error("the fetch never settled");
  return { ...outcome, clockMs: clock.now() - start };
}

describe("a busy snapshot part is retried on the harness clock (decision 0064)", () => {
  it("0064: a caller whose parts limit refills slower than it reads still gets the whole snapshot of its one take", async () => {
    const clock = createManualClock(0);
    const object = served(clock, { partBurst: 1, partEveryMs: 1_000 });
    const { value, error } = await drive(clock, fetchSnapshot(object.link, "phone", ctx, { clock }));
    expect(error).toBeUndefined();
    expect(value).toEqual(copyAt(1));
    expect(object.reads()).toBe(1); // one take: the busy parts did not start another
    expect(object.calls.filter((args) => args.length === 1)).toHaveLength(1);
  });

  it("0064: a part the object keeps refusing ends in SnapshotPartsBusy after the bounded retries, each after a backoff", async () => {
    const clock = createManualClock(0);
    const object = served(clock, { partBurst: 1, partEveryMs: 1_000_000_000 });
    const { error, clockMs } = await drive(
      clock,
      fetchSnapshot(object.link, "phone", ctx, { clock, attempts: 4, firstDelayMs: 500, maxDelayMs: 1_000 }),
    );
    expect(error).toBeInstanceOf(SnapshotPartsBusy);
    expect(error).toMatchObject({ name: "SnapshotPartsBusy", index: 2, attempts: 5 });
    expect(object.calls.filter((args) => args[2] === 2)).toHaveLength(5); // the first ask and four retries
    expect(clockMs).toBeGreaterThanOrEqual(500 + 1_000 * 3); // the delays doubled up to maxDelayMs, on the manual clock
    expect(object.reads()).toBe(1);
  });

  it("0064: a take displaced while it is read (gone) starts one new take; a second gone ends the fetch as SnapshotUnavailable", async () => {
    const clock = createManualClock(0);
    const object = served(clock, {});
    let displaced = 0;
    const link = {
      call: async (topic: string, method: string, args: Json[]) => {
        if (args.length === 3 && args[2] === 2 && displaced++ < 1) throw new SnapshotUnavailable("gone", "displaced");
        return object.link.call(topic, method, args);
      },
    };
    const { value } = await drive(clock, fetchSnapshot(link, "phone", ctx, { clock }));
    expect(value).toEqual(copyAt(2));
    const gone = { call: async () => Promise.reject(new SnapshotUnavailable("gone", "displaced")) };
    const first = { call: async (t: string, m: string, a: Json[]) => (a.length === 1 ? object.link.call(t, m, a) : gone.call()) };
    const { error } = await drive(clock, fetchSnapshot(first, "laptop", ctx, { clock, takes: 1 }));
    expect(error).toMatchObject({ name: "SnapshotUnavailable", reason: "gone" });
  });

  it("0064: hostile answers and hostile retry options end in the snapshot or a typed error, within bounded calls", async () => {
    const clock = createManualClock(0);
    const whole = served(clock, {});
    const first = (await whole.link.call("follow", "snapshot", ["x"])) as unknown as { id: string; count: number };
    const parts: Json[] = [];
    for (let index = 0; index < first.count; index++) parts.push(await whole.link.call("follow", "snapshot", ["x", first.id, index]));
    const answer = fc.oneof(
      fc.constant<"real">("real"),
      fc.constantFrom("busy", "gone", "empty", "size").map((reason) => new SnapshotUnavailable(reason as never, "hostile")),
      fc.anything().map((value) => ({ hostile: value })),
      fc.record({ index: fc.oneof(fc.integer(), fc.double()), id: fc.string() }),
    );
    const option = fc.option(fc.oneof(fc.integer({ min: -10, max: 40 }), fc.double(), fc.constant(Number.NaN), fc.constant(1e12)), {
      nil: undefined,
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(answer, { maxLength: 40 }),
        option,
        option,
        option,
        option,
        async (script, attempts, firstDelayMs, maxDelayMs, takes) => {
          let calls = 0;
          const link = {
            call: async (_t: string, _m: string, args: Json[]) => {
              const next = script[calls++] ?? "real";
              if (next instanceof Error) throw next;
              if (next === "real") return parts[(args[2] as number | undefined) ?? 0]!;
              return next as Json;
            },
          };
          const { value, error } = await drive(clock, fetchSnapshot(link, "p", ctx, { clock, attempts, firstDelayMs, maxDelayMs, takes }));
          if (error === undefined) expect(value).toEqual(copyAt(1));
          else expect([SnapshotPartsBusy, SnapshotUnavailable, FollowMessageRefused].some((kind) => error instanceof kind)).toBe(true);
          expect(calls).toBeLessThanOrEqual(33 * 33 * first.count);
        },
      ),
      { numRuns: 60 },
    );
  });
});
