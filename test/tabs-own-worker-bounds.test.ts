/**
 * Decision 0151, on a worker's page (the tabs' endpoint, src/browser/tabs/follower.ts):
 * - a hostile or broken own worker that stays `ready` and answers every call `HarnessClosed`: the call waited for that
 *   worker's status to leave `ready` (the database leaving it) with no bound; now until the call's bound
 *   (`RESEND_WINDOW_MS`), then the worker's answer is the call's.
 * - the own door's hook that never answers a refused page's watch (decision 0144, `pastOwnDoor`): no bound of its own,
 *   as no door bounds a watch (a watch waits for its conversation, 0103); the caller's cancel ends it and nothing stays
 *   held, nothing is carried — a guard of the decision's argument (it passes on the code before too).
 */
import { describe, expect, it } from "vitest";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { pastOwnDoor } from "../src/browser/tabs/own-door.ts";
import { RESEND_WINDOW_MS } from "../src/browser/tabs/retry.ts";
import { HarnessClosed } from "../src/errors.ts";
import { guardEndpoint } from "../src/host/doors.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { cancelPending } from "../src/host/pending-subscription.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { macrotask, tabsTestScope } from "./tabs-support.ts";

function settle(call: Promise<unknown>) {
  const seen: { value?: unknown; error?: Error; settled: number } = { settled: 0 };
  call.then(
    (value) => Object.assign(seen, { value, settled: seen.settled + 1 }),
    (error: Error) => Object.assign(seen, { error, settled: seen.settled + 1 }),
  );
  return seen;
}

const turns = async (n = 3) => {
  for (let i = 0; i < n; i++) await macrotask();
};

describe("0151: an own worker that stays ready and answers HarnessClosed", () => {
  const scope = tabsTestScope();

  it("S4 (a call ends; a harness never wedges): a getTask to this tab's worker that says ready and answers HarnessClosed is pending at RESEND_WINDOW_MS − 1 and ends with that answer at the bound, once, sent once, no timer left (fails before: pending for good)", async () => {
    const clock = createManualClock(0);
    let sends = 0;
    const own: HostEndpoint = {
      call: (method) => {
        if (method === "lifeLock") return new Promise(() => {});
        sends++;
        return new Promise((_, reject) => setImmediate(() => reject(new HarnessClosed("a hostile worker's harness"))));
      },
      subscribe: async (method, _args, emit) => {
        if (method === "onStatus") (emit as (status: HarnessStatus) => void)({ kind: "ready", database: "db" } as HarnessStatus);
        return 1;
      },
      unsubscribe: () => {},
    } as HostEndpoint;
    const endpoint = tabsEndpoint(own, { clock });
    scope.cleanups.push(() => endpoint.close());
    await turns(5);
    const ended = settle(endpoint.call("getTask", ["t1"]));
    await turns(10);
    expect(sends).toBe(1);
    for (let at = 0; at < RESEND_WINDOW_MS - 1_000; at += 1_000) {
      clock.advance(1_000);
      await turns();
    }
    clock.advance(999);
    await turns();
    expect(ended.settled).toBe(0);
    clock.advance(1);
    await turns();
    expect(ended.settled).toBe(1);
    expect(ended.error).toBeInstanceOf(HarnessClosed);
    expect(sends).toBe(1);
    endpoint.close();
    expect(clock.pending).toBe(0);
  });

  it("S4: the worker's status leaving ready within the bound ends the wait then, and the bound's timer is cleared with it (the database left it; before: no timer to clear, so the count check fails there)", async () => {
    const clock = createManualClock(0);
    let tell!: (status: HarnessStatus) => void;
    const own: HostEndpoint = {
      call: (method) => {
        if (method === "lifeLock") return new Promise(() => {});
        return new Promise((_, reject) => setImmediate(() => reject(new HarnessClosed("the harness"))));
      },
      subscribe: async (method, _args, emit) => {
        if (method === "onStatus") {
          tell = emit as (status: HarnessStatus) => void;
          tell({ kind: "ready", database: "db" } as HarnessStatus);
        }
        return 1;
      },
      unsubscribe: () => {},
    } as HostEndpoint;
    const endpoint = tabsEndpoint(own, { clock });
    scope.cleanups.push(() => endpoint.close());
    await turns(5);
    const ended = settle(endpoint.call("getTask", ["t1"]));
    await turns(10);
    const timers = clock.pending;
    clock.advance(5_000);
    tell({ kind: "closed", reason: "close" } as HarnessStatus); // no tab follows: the call ends with the worker's answer
    await turns(5);
    expect(ended.settled).toBe(1);
    expect(ended.error).toBeInstanceOf(HarnessClosed);
    expect(clock.pending).toBeLessThan(timers); // its bound's timer went with it
  });
});

describe("0151 (guard): the own door's hook that never answers a refused page's watch", () => {
  it("S4 (nothing held past a give-up): the watch waits at the own door as any watch waits at its door; the caller's cancel ends it, nothing is carried, and the hook's late yes holds nothing at the own worker", async () => {
    const held = new Set<number>();
    let next = 0;
    const worker: HostEndpoint = {
      call: async () => null,
      subscribe: async () => {
        const id = ++next;
        held.add(id);
        return id;
      },
      unsubscribe: (id) => void held.delete(id),
    };
    let answer!: (allowed: boolean) => void;
    const hook = new Promise<boolean>((resolve) => (answer = resolve));
    const own = guardEndpoint(worker, { from: "page" }, { authorize: () => hook });
    let carried = 0;
    const watch = pastOwnDoor(
      own,
      "watchTasks",
      [],
      () => false,
      async () => ++carried,
    );
    const seen = settle(watch);
    await turns(10);
    expect(seen.settled).toBe(0);
    cancelPending(watch); // the caller gives it up (HostClient's cancel, or its page going)
    await turns(5);
    answer(true); // the hook answers at last
    await turns(10);
    expect(carried).toBe(0);
    expect(held.size).toBe(0);
    expect(seen.settled).toBeLessThanOrEqual(1);
  });
});
