/**
 * The review of decision 0151 (bounded socket waits), its probes as behaviour tests. Every timer is the test's manual
 * clock; real turns (`macrotask`) only let messages pass, nothing is timed on the wall clock.
 * - M1: once a send of a call was lost in flight (it may have run), a retryable answer that says "nothing was done"
 *   (0148's `TooManyCallsInFlight`, `AuthorizeFailed`) ends it `ConnectionLost`: on the object (the client's resend
 *   over the socket) and on a worker's page (the tabs' `sendCall`).
 * - M2: this tab's worker answering `HarnessClosed` near or past the call's 60 s, its status following a little later
 *   (a real takeover): `ConnectionLost`, as before 0151, not `HarnessClosed`. The status's wait is counted from the
 *   answer (`OWN_STATUS_GRACE_MS`; a worker that stays `ready`: test/tabs-own-worker-bounds.test.ts).
 * - L1: a call with no time left on a down socket leaves no promise behind for `close()` to reject unhandled.
 * - L2: a read sent again and again, answered `NotReady` each time, whose socket then stays down, says so.
 * - L3: the tabs' `close()` ends the calls waiting for this tab's worker's status, and clears their timers.
 */
import { describe, expect, it } from "vitest";
import { CALL_WAIT_MS } from "../src/browser/connection-wait.ts";
import { NOT_READY_RESEND_MS, resendingNotReady } from "../src/browser/not-ready-resend.ts";
import { socketEndpoint } from "../src/browser/socket.ts";
import { type CallRoute, OWN, sendCall } from "../src/browser/tabs/calls.ts";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { AuthorizeFailed, TooManyCallsInFlight } from "../src/errors/wire.ts";
import { ConnectionLost, HarnessClosed, NotReady } from "../src/errors.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createManualClock, type ManualClock } from "../src/testing/clock.ts";
import { scriptedSockets, settle } from "./socket-support.ts";
import { macrotask, tabsTestScope } from "./tabs-support.ts";

const flush = async () => {
  for (let i = 0; i < 60; i++) await Promise.resolve();
};
async function pass(clock: ManualClock, ms: number, step = 250) {
  for (let left = ms; left > 0; left -= step) {
    clock.advance(Math.min(step, left));
    await flush();
  }
}
const turns = async (n = 3) => {
  for (let i = 0; i < n; i++) await macrotask();
};

function outcome(call: Promise<unknown>, clock: ManualClock) {
  const seen: { value?: unknown; error?: Error; settled: number; at?: number } = { settled: 0 };
  call.then(
    (value) => Object.assign(seen, { value, settled: seen.settled + 1, at: clock.now() }),
    (error: Error) => Object.assign(seen, { error, settled: seen.settled + 1, at: clock.now() }),
  );
  return seen;
}

/** The page's socket and the client's resend over it, on `clock`. */
function pageOn(clock: ManualClock, host: HostEndpoint) {
  const sockets = scriptedSockets(host);
  const socket = socketEndpoint(sockets.connect, {
    random: () => 1,
    setTimer: (fire, ms) => clock.setTimer(ms, fire),
    clearTimer: (cancel) => (cancel as () => void)(),
    now: clock.now,
  });
  const page = resendingNotReady(socket, { clock, random: () => 1 });
  return { sockets, socket, page };
}

const busy = {
  TooManyCallsInFlight: (method: string) => new TooManyCallsInFlight(method, 64),
  AuthorizeFailed: (method: string) => new AuthorizeFailed(method),
};

describe("review of 0151, M1: a retryable answer after a send lost in flight is ConnectionLost", () => {
  for (const [name, refuse] of Object.entries(busy)) {
    it(`S4 (the page told the truth, 0146's H1): a submit on the object answered NotReady, its resend lost in flight, the next resend answered ${name}: ConnectionLost, one key across the sends (fails before: ${name}, retryable, and the app sends it again under a new key)`, async () => {
      const clock = createManualClock(0);
      const received: unknown[][] = [];
      const host: HostEndpoint = {
        call: async (method, args) => {
          received.push(args);
          if (received.length === 1) throw new NotReady("the object is between its harnesses");
          if (received.length === 2) return new Promise(() => {}); // held: lost with its connection
          throw refuse(method);
        },
        subscribe: async () => 1,
        unsubscribe: () => {},
      };
      const { sockets, page } = pageOn(clock, host);
      await settle();
      const call = outcome(page.call("submit", ["c1", { content: "hello" }]), clock);
      await flush();
      await pass(clock, 250, 50);
      expect(received).toHaveLength(2);
      sockets.drop();
      await pass(clock, 5_000);
      expect(received).toHaveLength(3);
      expect(call.settled).toBe(1);
      expect(call.error).toBeInstanceOf(ConnectionLost);
      expect(new Set(received.map((args) => (args[1] as { requestId?: string }).requestId)).size).toBe(1);
      page.close();
    });

    it(`S4 (0146's H1 on a worker's page): sendCall — this tab's worker lost the database with a submit in flight, it went again and was answered ${name}: ConnectionLost (fails before: ${name})`, async () => {
      const clock = createManualClock(0);
      const sent: unknown[][] = [];
      const own: HostEndpoint = {
        call: async (method, args) => {
          sent.push(args);
          if (sent.length === 1) throw new HarnessClosed("closed under it: another tab took the database");
          throw refuse(method);
        },
        subscribe: async () => 1,
        unsubscribe: () => {},
      };
      const route: CallRoute = {
        clock,
        next: async () => OWN,
        pause: (ms) => new Promise<void>((resolve) => clock.setTimer(ms, resolve)),
        random: () => 1,
        endpointOf: () => own,
        // The first answer is the database leaving it (a takeover); the second is the worker's own "busy".
        ownLost: async (error) => error instanceof HarnessClosed,
        lose: () => {},
        waitsElsewhere: () => false,
      };
      const call = outcome(sendCall(route, "submit", ["c1", { content: "hello" }]), clock);
      await pass(clock, 5_000, 50);
      expect(sent).toHaveLength(2);
      expect(call.settled).toBe(1);
      expect(call.error).toBeInstanceOf(ConnectionLost);
      expect(new Set(sent.map((args) => (args[1] as { requestId?: string }).requestId)).size).toBe(1);
    });
  }

  it("S4 (a guard): before any loss, the same answer is the caller's as it is (nothing was done, the app may send again)", async () => {
    const clock = createManualClock(0);
    const host: HostEndpoint = {
      call: async (method) => {
        throw new TooManyCallsInFlight(method, 64);
      },
      subscribe: async () => 1,
      unsubscribe: () => {},
    };
    const { page } = pageOn(clock, host);
    await settle();
    const call = outcome(page.call("submit", ["c1", { content: "hello" }]), clock);
    await pass(clock, 1_000);
    expect(call.error).toBeInstanceOf(TooManyCallsInFlight);
    page.close();
  });
});

describe("review of 0151, M2: this tab's worker's HarnessClosed waits for its status from the answer", () => {
  const scope = tabsTestScope();

  /** A worker `ready` that holds a submit `heldMs`, then answers `HarnessClosed`; its status (if told) `statusAfterMs` later. */
  function ownWorker(clock: ManualClock, heldMs: number, statusAfterMs?: number) {
    let tell!: (status: HarnessStatus) => void;
    let sends = 0;
    const own: HostEndpoint = {
      call: (method) => {
        if (method === "lifeLock") return new Promise(() => {});
        sends++;
        return new Promise((_, reject) =>
          clock.setTimer(heldMs, () => {
            reject(new HarnessClosed("closed under it: another tab took the database"));
            if (statusAfterMs === undefined) return;
            clock.setTimer(statusAfterMs, () => {
              tell({ kind: "closed", reason: "takeover" } as HarnessStatus);
              tell({ kind: "waiting-for-lock", database: "db" } as HarnessStatus);
            });
          }),
        );
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
    return { own, sends: () => sends };
  }

  /** Moves the clock in 10 ms steps until `seen` settles or `limit` passed, letting the worker's messages through. */
  async function runUntil(clock: ManualClock, seen: { settled: number }, limit: number) {
    for (let t = 0; t < limit && seen.settled === 0; t += 10) {
      clock.advance(10);
      await flush();
      if (t % 1_000 === 0) await turns(1);
    }
    await turns(3);
  }

  for (const [heldMs, statusAfterMs] of [
    [59_990, 20],
    [65_000, 1],
    [10_000, 20],
  ] as const) {
    it(`S4 (a takeover is a loss, 0146): a submit held ${heldMs} ms by this tab's worker, its harness closing under it and the status following ${statusAfterMs} ms later, ends ConnectionLost (it may have run), sent once${heldMs >= 59_990 ? " (fails before: HarnessClosed, not retryable)" : " (a guard: so before too)"}`, async () => {
      const clock = createManualClock(0);
      const worker = ownWorker(clock, heldMs, statusAfterMs);
      const endpoint = tabsEndpoint(worker.own, { clock });
      scope.cleanups.push(() => endpoint.close());
      await turns(5);
      const call = outcome(endpoint.call("submit", ["c1", { content: "hi" }]), clock);
      await turns(5);
      await runUntil(clock, call, 130_000);
      expect(call.settled).toBe(1);
      expect(call.error).toBeInstanceOf(ConnectionLost);
      expect(worker.sends()).toBe(1);
      endpoint.close();
    });
  }
});

describe("review of 0151, L3: the tabs' close() ends the calls waiting for this tab's worker's status", () => {
  const scope = tabsTestScope();

  it("S4 (nothing left pending at close): a call answered HarnessClosed by a worker still ready ends ConnectionLost at close, its timer cleared (fails before: pending, then HarnessClosed 60 s after the close)", async () => {
    const clock = createManualClock(0);
    const own: HostEndpoint = {
      call: (method) => (method === "lifeLock" ? new Promise(() => {}) : Promise.reject(new HarnessClosed("closed"))),
      subscribe: async (method, _args, emit) => {
        if (method === "onStatus") (emit as (status: HarnessStatus) => void)({ kind: "ready", database: "db" } as HarnessStatus);
        return 1;
      },
      unsubscribe: () => {},
    } as HostEndpoint;
    const endpoint = tabsEndpoint(own, { clock });
    scope.cleanups.push(() => endpoint.close());
    await turns(5);
    const call = outcome(endpoint.call("getTask", ["t1"]), clock);
    await turns(5);
    expect(call.settled).toBe(0);
    endpoint.close();
    await turns(3);
    expect(call.settled).toBe(1);
    expect(call.error).toBeInstanceOf(ConnectionLost);
    expect(clock.pending).toBe(0);
  });
});

describe("review of 0151, L1 and L2: the socket's waits", () => {
  it("S4 (nothing left behind): a call with no time left on a down socket ends NotReady and waits for no link — close() later rejects nothing unhandled (fails before: an unhandled ConnectionLost)", async () => {
    const clock = createManualClock(0);
    const host: HostEndpoint = { call: async () => "ok", subscribe: async () => 1, unsubscribe: () => {} };
    const { sockets, socket } = pageOn(clock, host);
    await settle();
    sockets.failAttempts(1_000_000);
    sockets.drop();
    await settle();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      await expect(socket.call("getTask", ["t1"], 0)).rejects.toBeInstanceOf(NotReady);
      socket.close();
      await turns(3);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
    expect(unhandled).toEqual([]);
  });

  it("S4 (the page told the truth): a read sent again and again, answered NotReady each time, whose socket then stays down, ends NotReady saying so — not 'waited 0 s … it was not sent' (fails before)", async () => {
    const clock = createManualClock(0);
    const received: unknown[][] = [];
    const host: HostEndpoint = {
      call: async (_method, args) => {
        received.push(args);
        throw new NotReady("the object is between its harnesses");
      },
      subscribe: async () => 1,
      unsubscribe: () => {},
    };
    const { sockets, page } = pageOn(clock, host);
    await settle();
    const call = outcome(page.call("getTask", ["t1"]), clock);
    await flush();
    await pass(clock, NOT_READY_RESEND_MS - 100, 50);
    sockets.failAttempts(1_000_000);
    sockets.drop();
    await pass(clock, CALL_WAIT_MS, 50);
    expect(call.settled).toBe(1);
    expect(call.error).toBeInstanceOf(NotReady);
    expect(received.length).toBeGreaterThan(1);
    expect(call.error?.message).toContain(`sent ${received.length} times and answered not ready each time`);
    expect(call.error?.message).not.toContain("it was not sent");
    page.close();
  });
});
