/**
 * Decision 0151, on a worker's page (the tabs' endpoint, src/browser/tabs/follower.ts):
 * - a hostile or broken own worker that stays `ready` and answers every call `HarnessClosed`: the call waited for that
 *   worker's status to leave `ready` (the database leaving it) with no bound; now `OWN_STATUS_GRACE_MS` from that
 *   answer, then it ends `ConnectionLost` (its harness closed: it may have run; the review of 0151, M2, made the wait
 *   count from the answer, not from the call).
 * - the own door's hook that never answers a refused page's watch (decision 0144, `pastOwnDoor`): no bound of its own,
 *   as no door bounds a watch (a watch waits for its conversation, 0103); the caller's cancel ends it and nothing stays
 *   held, nothing is carried — a guard of the decision's argument (it passes on the code before too).
 */
import { describe, expect, it } from "vitest";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { pastOwnDoor } from "../src/browser/tabs/own-door.ts";
import { OWN_STATUS_GRACE_MS } from "../src/browser/tabs/own-left.ts";
import { ConnectionLost, HarnessClosed } from "../src/errors.ts";
import { guardEndpoint } from "../src/host/doors.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { cancelPending } from "../src/host/pending-subscription.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createManualClock, type ManualClock } from "../src/testing/clock.ts";
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

  /** A worker `ready` that answers every call `HarnessClosed` `heldMs` after it; `tell` sets its status. */
  function ownWorker(clock: ManualClock, heldMs: number) {
    let tell!: (status: HarnessStatus) => void;
    let sends = 0;
    const own: HostEndpoint = {
      call: (method) => {
        if (method === "lifeLock") return new Promise(() => {});
        sends++;
        return new Promise((_, reject) => clock.setTimer(heldMs, () => reject(new HarnessClosed("the worker's harness"))));
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
    return { own, sends: () => sends, tell: (status: HarnessStatus) => tell(status) };
  }

  it("S4 (a call ends; a harness never wedges): a getTask to this tab's worker that says ready and answers HarnessClosed is pending OWN_STATUS_GRACE_MS − 1 after that answer and ends ConnectionLost at the grace (its harness closed: it may have run; review of 0151, M2), once, sent once, no timer left (fails before 0151: pending for good; before its review: HarnessClosed at the call's 60 s)", async () => {
    const clock = createManualClock(0);
    const worker = ownWorker(clock, 1_000);
    const endpoint = tabsEndpoint(worker.own, { clock });
    scope.cleanups.push(() => endpoint.close());
    await turns(5);
    const ended = settle(endpoint.call("getTask", ["t1"]));
    await turns(10);
    expect(worker.sends()).toBe(1);
    clock.advance(1_000); // the worker's answer
    await turns();
    clock.advance(OWN_STATUS_GRACE_MS - 1);
    await turns();
    expect(ended.settled).toBe(0);
    clock.advance(1);
    await turns();
    expect(ended.settled).toBe(1);
    expect(ended.error).toBeInstanceOf(ConnectionLost);
    expect(worker.sends()).toBe(1);
    endpoint.close();
    expect(clock.pending).toBe(0);
  });

  it("S4: answered HarnessClosed 59 s after the call, the worker's status leaving ready 3 s later (past the call's 60 s, within the grace) ends the wait then, with that answer (a real close, no tab to follow), and the grace's timer is cleared with it (fails before the review: HarnessClosed at 60 s, the status not waited for)", async () => {
    const clock = createManualClock(0);
    const worker = ownWorker(clock, 59_000);
    const endpoint = tabsEndpoint(worker.own, { clock });
    scope.cleanups.push(() => endpoint.close());
    await turns(5);
    const ended = settle(endpoint.call("getTask", ["t1"]));
    await turns(10);
    for (let at = 0; at < 61_000; at += 1_000) {
      clock.advance(1_000);
      await turns();
    }
    clock.advance(999);
    await turns();
    expect(ended.settled).toBe(0); // 61.999 s: still waiting for the status
    const timers = clock.pending;
    clock.advance(1);
    worker.tell({ kind: "closed", reason: "close" } as HarnessStatus); // no tab follows: the call ends with the answer
    await turns(5);
    expect(ended.settled).toBe(1);
    expect(ended.error).toBeInstanceOf(HarnessClosed);
    expect(clock.pending).toBeLessThan(timers); // the grace's timer went with it
    endpoint.close();
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
