/**
 * Review of decision 0146 (the reviewer's two probes, made tests): a call through the tabs' endpoint (`sendCall`,
 * src/browser/tabs/calls.ts) that a place went with in flight ends `ConnectionLost` ("may or may not have run") at its
 * bound whatever way it waited then (H1: a resend this tab's worker sent on as `forward` ended `NotReady`, "not sent
 * and nothing was done"); a call a worker keeps answering "not open" while `ready` is sent again only after a backoff
 * and ends at its bound (M1: it went again at once, for good, starving the event loop); the give-up message says what
 * happened and how long (L1); the backoff's draws are an option (L2); a forward or a resend that gives up, and a resend
 * that picks a moved place (L3).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { NOT_READY_RESEND_MS } from "../src/browser/not-ready-resend.ts";
import { OWN, PlaceWaits, sendCall, type Target, type Way } from "../src/browser/tabs/calls.ts";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import type { Link } from "../src/browser/tabs/link.ts";
import { RESEND_WINDOW_MS } from "../src/browser/tabs/retry.ts";
import { ConnectionLost, NotReady } from "../src/errors.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { markWaitingFor } from "../src/host/error-wire.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createManualClock, type ManualClock } from "../src/testing/clock.ts";
import { macrotask, tabsTestScope } from "./tabs-support.ts";

const turns = async (n: number) => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
};

function settle(call: Promise<unknown>) {
  const seen: { value?: unknown; error?: Error; settled: number } = { settled: 0 };
  call.then(
    (value) => Object.assign(seen, { value, settled: seen.settled + 1 }),
    (error: Error) => Object.assign(seen, { error, settled: seen.settled + 1 }),
  );
  return seen;
}

const leaderA = { name: "leader A" } as unknown as Link;
const leaderB = { name: "leader B" } as unknown as Link;
const nameOf = (target: Target) => (target === OWN ? "own" : (target as unknown as { name: string }).name);
const notOpen = () => new Error("not open: waiting for the database another tab has");

/**
 * A route over `PlaceWaits` on a manual clock: `place(way)` says where an attempt goes (undefined: none yet), `answer`
 * how each place answers each send; `lost` errors from this tab's worker are the database leaving it (`ownLost`).
 */
function route(clock: ManualClock, place: (way: Way) => Target | undefined, answer: (to: string, args: unknown[]) => unknown) {
  const waits = new PlaceWaits(clock, place);
  const sends: Array<{ to: string; at: number; args: unknown[] }> = [];
  const elsewhere = new Set<unknown>();
  const lost = new Set<unknown>();
  return {
    waits,
    sends,
    route: {
      clock,
      random: () => 0.5,
      next: (way: Way, bound?: Parameters<PlaceWaits["next"]>[1]) => waits.next(way, bound),
      pause: (ms: number) => waits.pause(ms),
      endpointOf: (target: Target) =>
        ({
          call: async (_method: string, args: unknown[]) => {
            const to = nameOf(target);
            sends.push({ to, at: clock.now(), args });
            const answered = answer(to, args);
            if (answered instanceof Error) {
              if (answered.message.startsWith("not open")) elsewhere.add(answered);
              if (answered.message === "lost") lost.add(answered);
              throw answered;
            }
            return answered;
          },
        }) as unknown as HostEndpoint,
      ownLost: async (error: unknown) => lost.has(error),
      lose: () => {},
      waitsElsewhere: (error: unknown) => elsewhere.has(error),
    },
  };
}

describe("review 0146 H1: a call a place went with is never told 'not sent'", () => {
  it("S4 (a submission made once; the page told the truth): a submit the old leader went with, resent to this tab's worker that answers 'not open', with no place within the window, ends ConnectionLost at RESEND_WINDOW_MS — never NotReady 'nothing was done' (fails before: NotReady)", async () => {
    const clock = createManualClock(0);
    let leaderGone = false;
    const world = route(
      clock,
      (way) => {
        if (way === "call") return leaderGone ? undefined : leaderA;
        if (way === "resend") return OWN; // this page cannot see its worker's status: its door decides first
        return undefined; // forward: no leader ready yet
      },
      (to) => {
        if (to === "own") return notOpen();
        leaderGone = true; // the leader took the submit and went before answering: it may have run there
        return new ConnectionLost();
      },
    );
    const ended = settle(sendCall(world.route, "submit", ["c1", { content: "hello" }]));
    await turns(5);
    expect(world.sends.map((send) => send.to)).toEqual(["leader A", "own"]);
    clock.advance(RESEND_WINDOW_MS - 1);
    await turns(5);
    expect(ended.settled).toBe(0);
    clock.advance(1);
    await turns(5);
    expect(ended.settled).toBe(1);
    expect(ended.error).toBeInstanceOf(ConnectionLost);
    expect(ended.error?.message).toMatch(/may or may not have run/);
    world.waits.close(new ConnectionLost());
    expect(clock.pending).toBe(0);
  });

  it("S4: a submit a leader went with, then answered NotReady by the next place for NOT_READY_RESEND_MS, ends ConnectionLost, not the place's NotReady (it may have run at the first)", async () => {
    const clock = createManualClock(0);
    let leaderGone = false;
    const world = route(
      clock,
      () => (leaderGone ? leaderB : leaderA),
      (to) => {
        if (to === "leader B") return new NotReady("the object is between its harnesses");
        leaderGone = true;
        return new ConnectionLost();
      },
    );
    const ended = settle(sendCall(world.route, "submit", ["c1", { content: "hello" }]));
    for (let at = 0; at <= RESEND_WINDOW_MS + NOT_READY_RESEND_MS && ended.settled === 0; at += 100) {
      await turns(3);
      clock.advance(100);
    }
    await turns(3);
    expect(ended.settled).toBe(1);
    expect(ended.error).toBeInstanceOf(ConnectionLost);
    const keys = new Set(world.sends.map((send) => (send.args[1] as { requestId?: string }).requestId));
    expect(keys.size).toBe(1); // one key across every send
    world.waits.close(new ConnectionLost());
  });
});

describe("review 0146 M1: a worker that says ready and answers every call 'not open'", () => {
  const scope = tabsTestScope();

  it("S4 (a call ends; a harness never wedges): through the tabs' endpoint, a getTask to this tab's ready worker answering its own 'not open' is pending at RESEND_WINDOW_MS − 1, ends NotReady at the bound, once, after a bounded number of sends (fails before: sent again at once, for good, pending past five windows)", async () => {
    const clock = createManualClock(0);
    let sends = 0;
    const own: HostEndpoint = {
      call: (method) => {
        if (method === "lifeLock") return new Promise(() => {});
        sends++;
        // a real worker answers over a MessagePort: a macrotask per answer
        return new Promise((_, reject) => setImmediate(() => reject(markWaitingFor(new Error("not open"), "db"))));
      },
      subscribe: async (method, _args, emit) => {
        if (method === "onStatus") (emit as (status: HarnessStatus) => void)({ kind: "ready", database: "db" } as HarnessStatus);
        return 1;
      },
      unsubscribe: () => {},
    } as HostEndpoint;
    const endpoint = tabsEndpoint(own, { clock });
    scope.cleanups.push(() => endpoint.close());
    for (let i = 0; i < 5; i++) await macrotask();
    const ended = settle(endpoint.call("getTask", ["t1"]));
    for (let i = 0; i < 20; i++) await macrotask();
    expect(sends).toBe(1); // the first "not open": sent there again only after a pause
    for (let at = 0; at < RESEND_WINDOW_MS - 1_000; at += 1_000) {
      clock.advance(1_000);
      for (let i = 0; i < 3; i++) await macrotask();
    }
    clock.advance(999);
    for (let i = 0; i < 3; i++) await macrotask();
    expect(ended.settled).toBe(0);
    clock.advance(1);
    for (let i = 0; i < 3; i++) await macrotask();
    expect(ended.settled).toBe(1);
    expect(ended.error).toBeInstanceOf(NotReady);
    expect(ended.error?.message).toMatch(/within 60 s of this call.*not sent to any place that could run it/);
    expect(sends).toBeGreaterThan(1);
    expect(sends).toBeLessThan(30); // backoff from 250 ms to 4 s within 60 s
    endpoint.close();
    expect(clock.pending).toBe(0);
  });

  /** How a hostile (or lagging) ready worker answers one send. */
  const answers = ["not open", "NotReady", "lost", "app error", "ok"] as const;
  type Answer = (typeof answers)[number];
  const made = (answer: Answer): unknown =>
    answer === "not open"
      ? notOpen()
      : answer === "NotReady"
        ? new NotReady("not ready")
        : answer === "lost"
          ? new Error("lost")
          : answer === "app error"
            ? Object.assign(new Error("the app's"), { name: "AppError" })
            : "answered";

  it("S4 (property, fast-check over hostile answers answered in microtasks): each call ends exactly once at its bound at the latest, with a typed error or the answer; never NotReady once a place went with it; a bounded number of sends, at most two per clock step (no spin starving the event loop; before: 100,000 sends within 3 turns); no timer left", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom(...answers), { maxLength: 8 }),
        fc.constantFrom(...answers.filter((answer) => answer !== "ok")),
        fc.constantFrom("getTask", "submit", "abortConversation"),
        fc.double({ min: 0, max: 0.999, noNaN: true }),
        async (first, always, method, draw) => {
          const clock = createManualClock(0);
          const given: Answer[] = [];
          const world = route(
            clock,
            () => OWN, // its status says ready
            () => {
              const answer = first[given.length] ?? always;
              given.push(answer);
              return made(answer);
            },
          );
          const ended = settle(sendCall({ ...world.route, random: () => draw }, method, ["c1", { content: "hi" }]));
          let before = 0;
          for (let step = 0; step < 200 && ended.settled === 0; step++) {
            await turns(3);
            expect(world.sends.length - before).toBeLessThanOrEqual(2);
            before = world.sends.length;
            clock.advance(500);
          }
          await turns(3);
          expect(ended.settled).toBe(1);
          expect(world.sends.length).toBeLessThanOrEqual(40);
          const last = world.sends.at(-1)!.at;
          expect(last).toBeLessThan(RESEND_WINDOW_MS + NOT_READY_RESEND_MS);
          const end = given.at(-1);
          if (end === "ok") expect(ended.value).toBe("answered");
          else expect(ended.error).toBeInstanceOf(Error);
          if (given.includes("lost")) expect(ended.error).not.toBeInstanceOf(NotReady);
          if (!given.includes("lost")) expect(ended.error).not.toBeInstanceOf(ConnectionLost);
          // Typed: the library's own errors, or the app's own one (never a "not open" or a loss the route followed).
          if (ended.error) expect(["NotReady", "ConnectionLost", "AppError"]).toContain(ended.error.name);
          if (method === "submit") {
            const keys = new Set(world.sends.map((send) => (send.args[1] as { requestId?: string }).requestId));
            expect(keys.size).toBe(1);
          }
          world.waits.close(new ConnectionLost());
          expect(clock.pending).toBe(0);
        },
      ),
      { numRuns: 150 },
    );
  });
});

describe("review 0146 L1/L3: the ways a call gives up, and a resend that follows a moved place", () => {
  it("L1 (S4): a getTask answered NotReady once at 50 s, then no place: ends NotReady at 80 s (its NotReady's window), saying it was sent and answered not ready, within 80 s — not 'within 60 s … not sent'", async () => {
    const clock = createManualClock(0);
    let place: Target | undefined;
    const world = route(
      clock,
      () => place,
      () => {
        place = undefined; // the place goes after its answer
        return new NotReady("not ready");
      },
    );
    const ended = settle(sendCall(world.route, "getTask", ["t1"]));
    clock.advance(50_000);
    place = OWN;
    world.waits.wake();
    await turns(5);
    expect(world.sends.map((send) => send.at)).toEqual([50_000]);
    clock.advance(30_000 - 1);
    await turns(5);
    expect(ended.settled).toBe(0);
    clock.advance(1);
    await turns(5);
    expect(ended.settled).toBe(1);
    expect(ended.error).toBeInstanceOf(NotReady);
    expect(ended.error?.message).toMatch(/within 80 s of this call.*sent and answered not ready each time \(not run\)/);
    world.waits.close(new ConnectionLost());
    expect(clock.pending).toBe(0);
  });

  it("L3 (S4): a first attempt this tab's worker answers 'not open', forwarded and finding no place, ends NotReady at RESEND_WINDOW_MS (nothing ran)", async () => {
    const clock = createManualClock(0);
    const world = route(
      clock,
      (way) => (way === "call" ? OWN : undefined),
      () => notOpen(),
    );
    const ended = settle(sendCall(world.route, "submit", ["c1", { content: "hello" }]));
    await turns(5);
    clock.advance(RESEND_WINDOW_MS - 1);
    await turns(5);
    expect(ended.settled).toBe(0);
    clock.advance(1);
    await turns(5);
    expect(ended).toMatchObject({ settled: 1 });
    expect(ended.error).toBeInstanceOf(NotReady);
    expect(world.sends.map((send) => send.to)).toEqual(["own"]);
    world.waits.close(new ConnectionLost());
  });

  it("L3 (S4): a resend after the leader went, finding no place, ends ConnectionLost at RESEND_WINDOW_MS", async () => {
    const clock = createManualClock(0);
    const world = route(
      clock,
      (way) => (way === "call" ? leaderA : undefined),
      () => new ConnectionLost(),
    );
    const ended = settle(sendCall(world.route, "getTask", ["t1"]));
    await turns(5);
    clock.advance(RESEND_WINDOW_MS - 1);
    await turns(5);
    expect(ended.settled).toBe(0);
    clock.advance(1);
    await turns(5);
    expect(ended.settled).toBe(1);
    expect(ended.error).toBeInstanceOf(ConnectionLost);
    world.waits.close(new ConnectionLost());
  });

  it("L3 (S4): a call answered NotReady by leader A goes again, after the pause, to leader B the database moved to — once, under the key of its first send", async () => {
    const clock = createManualClock(0);
    let place: Target = leaderA;
    const world = route(
      clock,
      () => place,
      (to) => (to === "leader A" ? new NotReady("not ready") : "made"),
    );
    const ended = settle(sendCall(world.route, "submit", ["c1", { content: "hello" }]));
    await turns(5);
    place = leaderB; // the database moved while the call paused
    clock.advance(4_000);
    await turns(5);
    expect(ended).toMatchObject({ value: "made", settled: 1 });
    expect(world.sends.map((send) => send.to)).toEqual(["leader A", "leader B"]);
    const keys = new Set(world.sends.map((send) => (send.args[1] as { requestId?: string }).requestId));
    expect(keys.size).toBe(1);
    world.waits.close(new ConnectionLost());
  });

  it("L3 (S4): a call leader A went with goes again at once to leader B the database moved to (a new place: no pause)", async () => {
    const clock = createManualClock(0);
    let place: Target = leaderA;
    const world = route(
      clock,
      () => place,
      (to) => {
        if (to === "leader B") return "made";
        place = leaderB;
        return new ConnectionLost();
      },
    );
    const ended = settle(sendCall(world.route, "getTask", ["t1"]));
    await turns(5);
    expect(ended).toMatchObject({ value: "made", settled: 1 });
    expect(world.sends.map((send) => [send.to, send.at])).toEqual([
      ["leader A", 0],
      ["leader B", 0],
    ]);
    world.waits.close(new ConnectionLost());
  });
});

describe("review 0146 L2: the backoff's draws are the endpoint's option", () => {
  const scope = tabsTestScope();

  it("S4: with random () => 0, a getTask this tab's worker answers NotReady once goes again at exactly 125 ms (the lower half of 250 ms), not before", async () => {
    const clock = createManualClock(0);
    const at: number[] = [];
    const own: HostEndpoint = {
      call: async (method) => {
        if (method === "lifeLock") return new Promise(() => {});
        at.push(clock.now());
        if (at.length === 1) throw new NotReady("not ready");
        return "task";
      },
      subscribe: async (method, _args, emit) => {
        if (method === "onStatus") (emit as (status: HarnessStatus) => void)({ kind: "ready", database: "db" } as HarnessStatus);
        return 1;
      },
      unsubscribe: () => {},
    } as HostEndpoint;
    const endpoint = tabsEndpoint(own, { clock, random: () => 0 });
    scope.cleanups.push(() => endpoint.close());
    for (let i = 0; i < 5; i++) await macrotask();
    const ended = settle(endpoint.call("getTask", ["t1"]));
    for (let i = 0; i < 5; i++) await macrotask();
    clock.advance(124);
    for (let i = 0; i < 5; i++) await macrotask();
    expect(at).toEqual([0]);
    clock.advance(1);
    for (let i = 0; i < 5; i++) await macrotask();
    expect(at).toEqual([0, 125]);
    expect(ended).toMatchObject({ value: "task", settled: 1 });
  });
});
