/**
 * Decision 0117, later (item 4 of its open seams): the socket's `onState` hears each change once. Two subscriptions that
 * wait at the same attempt told the same `unserved` twice in a row (each wait reported the longest), and a page's
 * status listeners heard the same `reconnecting` twice.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type SocketState, socketEndpoint } from "../src/browser/socket.ts";
import { AuthorizeFailed } from "../src/errors.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { manualTimer, scriptedSockets, settle } from "./socket-support.ts";

function failingWatches() {
  const mode = { failing: new Set<number>() };
  let next = 0;
  const endpoint: HostEndpoint = {
    call: async () => "done",
    subscribe: async (_method, args) => {
      if (mode.failing.has(args[0] as number)) throw new AuthorizeFailed("watchConversation");
      return ++next;
    },
    unsubscribe: () => {},
  };
  return { mode, endpoint };
}

/** A clock whose timers fire in due order (as a real one's do): a jittered shorter wait set later fires first. */
function dueClock() {
  let now = 0;
  const waiting: Array<{ fire: () => void; due: number }> = [];
  return {
    setTimer(fire: () => void, ms: number) {
      const timer = { fire, due: now + ms };
      waiting.push(timer);
      return timer;
    },
    clearTimer(timer: unknown) {
      const at = waiting.indexOf(timer as never);
      if (at >= 0) waiting.splice(at, 1);
    },
    async fire() {
      if (waiting.length === 0) return;
      const next = waiting.reduce((soonest, other) => (other.due < soonest.due ? other : soonest));
      waiting.splice(waiting.indexOf(next), 1);
      now = next.due;
      next.fire();
      await settle();
    },
  };
}

/** A seeded random source (mulberry32): the backoff's real jitter, reproducible. */
function seeded(seed: number) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Two `unserved` in a row at the same attempt: the page's listeners would hear the same `reconnecting` twice. */
/** Why an unserved subscription waits (decision 0123's review, L3): the host's answer, its hook threw. */
const failedAsk = expect.objectContaining({ name: "AuthorizeFailed" });

const sameAttemptTwice = (states: SocketState[]) =>
  states.filter((state, at) => {
    const before = states[at - 1];
    return at > 0 && state.state === "unserved" && before?.state === "unserved" && before.attempt === state.attempt;
  });

const repeats = (states: SocketState[]) => states.filter((state, at) => at > 0 && JSON.stringify(state) === JSON.stringify(states[at - 1]));

describe("onState hears each change once (decision 0117, later)", () => {
  it("0117 later (4): two subscriptions unserved at the same attempt: one `unserved` told, not the same one twice (before: twice)", async () => {
    const host = failingWatches();
    const sockets = scriptedSockets(host.endpoint);
    const timer = manualTimer();
    const states: SocketState[] = [];
    const socket = socketEndpoint(sockets.connect, {
      retryMs: 100,
      random: () => 1,
      setTimer: (fire, ms) => timer.setTimer(fire, ms),
      clearTimer: (handle) => timer.clearTimer(handle),
      onState: (state) => states.push(state),
    });
    await settle();
    await socket.subscribe(
      "watchConversation",
      [1],
      () => {},
      () => {},
    );
    await socket.subscribe(
      "watchConversation",
      [2],
      () => {},
      () => {},
    );
    host.mode.failing = new Set([1, 2]);
    sockets.drop();
    await settle();
    await timer.fire(); // the reconnect: both unserved at attempt 1
    expect(states).toEqual([
      { state: "open" },
      { state: "reconnecting", attempt: 1, retryInMs: 100 },
      { state: "open" },
      { state: "unserved", attempt: 1, retryInMs: 100, error: failedAsk },
    ]);
    await timer.fire();
    await timer.fire(); // both at attempt 2
    expect(states.at(-1)).toEqual({ state: "unserved", attempt: 2, retryInMs: 200, error: failedAsk });
    expect(repeats(states)).toEqual([]);
    socket.close();
  });

  it("0117 later (4): with jitter, a second subscription reaching the same attempt with a shorter wait is not told again: one `unserved` per attempt (before: twice, with different retryInMs)", async () => {
    const host = failingWatches();
    const sockets = scriptedSockets(host.endpoint);
    const clock = dueClock();
    const draws = [1, 1, 0, 1, 0]; // the reconnect, 1's wait, 2's wait (shorter), 2's second, 1's second
    const states: SocketState[] = [];
    const socket = socketEndpoint(sockets.connect, {
      retryMs: 100,
      random: () => draws.shift() ?? 1,
      setTimer: (fire, ms) => clock.setTimer(fire, ms),
      clearTimer: (handle) => clock.clearTimer(handle),
      onState: (state) => states.push(state),
    });
    await settle();
    for (const id of [1, 2])
      await socket.subscribe(
        "watchConversation",
        [id],
        () => {},
        () => {},
      );
    host.mode.failing = new Set([1, 2]);
    sockets.drop();
    await settle();
    await clock.fire(); // the reconnect: 1 waits 100, 2 waits 50
    await clock.fire(); // 2's wait fires first: attempt 2 (its wait 200)
    await clock.fire(); // 1's: attempt 2 too (its wait 100), not told again
    expect(states).toEqual([
      { state: "open" },
      { state: "reconnecting", attempt: 1, retryInMs: 100 },
      { state: "open" },
      { state: "unserved", attempt: 1, retryInMs: 100, error: failedAsk },
      { state: "unserved", attempt: 2, retryInMs: 200, error: failedAsk },
    ]);
    host.mode.failing = new Set();
    await clock.fire();
    await clock.fire(); // both served
    expect(states.at(-1)).toEqual({ state: "open" });
    socket.close();
  });

  it("0117 later (4), property with real jitter (seeded random, timers in due order): any number of subscriptions failing and recovering over waits and drops: never the same state twice in a row, never two `unserved` at one attempt in a row", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer(),
        fc.integer({ min: 1, max: 4 }),
        fc.subarray([1, 2, 3, 4]),
        fc.array(
          fc.oneof(
            { arbitrary: fc.constantFrom("drop", "fire"), weight: 3 },
            { arbitrary: fc.tuple(fc.integer({ min: 1, max: 4 }), fc.boolean()), weight: 1 },
          ),
          { maxLength: 20 },
        ),
        async (seed, count, failing, steps) => {
          const host = failingWatches();
          const sockets = scriptedSockets(host.endpoint);
          const clock = dueClock();
          const states: SocketState[] = [];
          const socket = socketEndpoint(sockets.connect, {
            retryMs: 100,
            maxRetryMs: 400,
            random: seeded(seed),
            setTimer: (fire, ms) => clock.setTimer(fire, ms),
            clearTimer: (handle) => clock.clearTimer(handle),
            onState: (state) => states.push(state),
          });
          await settle();
          for (let id = 1; id <= count; id++)
            await socket.subscribe(
              "watchConversation",
              [id],
              () => {},
              () => {},
            );
          host.mode.failing = new Set(failing); // asked again at the first drop's reconnect
          for (const step of steps) {
            if (step === "drop") sockets.drop();
            else if (step === "fire") await clock.fire();
            else if (step[1]) host.mode.failing.add(step[0]);
            else host.mode.failing.delete(step[0]);
            await settle();
          }
          expect(repeats(states)).toEqual([]);
          expect(sameAttemptTwice(states)).toEqual([]);
          socket.close();
        },
      ),
      { numRuns: 150, seed: 44 },
    );
  }, 120_000);

  it("0117 later (4), property: any number of subscriptions failing and recovering over waits and drops: onState never tells the same state twice in a row", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 4 }),
        fc.array(fc.oneof(fc.constantFrom("drop", "fire"), fc.tuple(fc.integer({ min: 1, max: 4 }), fc.boolean())), {
          maxLength: 16,
        }),
        async (count, steps) => {
          const host = failingWatches();
          const sockets = scriptedSockets(host.endpoint);
          const timer = manualTimer();
          const states: SocketState[] = [];
          const socket = socketEndpoint(sockets.connect, {
            retryMs: 100,
            maxRetryMs: 400,
            random: () => 1,
            setTimer: (fire, ms) => timer.setTimer(fire, ms),
            clearTimer: (handle) => timer.clearTimer(handle),
            onState: (state) => states.push(state),
          });
          await settle();
          for (let id = 1; id <= count; id++)
            await socket.subscribe(
              "watchConversation",
              [id],
              () => {},
              () => {},
            );
          for (const step of steps) {
            if (step === "drop") sockets.drop();
            else if (step === "fire") await timer.fire();
            else if (step[1]) host.mode.failing.add(step[0]);
            else host.mode.failing.delete(step[0]);
            await settle();
          }
          expect(repeats(states)).toEqual([]);
          socket.close();
        },
      ),
      { numRuns: 150, seed: 4 },
    );
  }, 120_000);
});
