/**
 * Decision 0117, later (item 5; its third review's R4): a subscription its host answers and then ends with what passes
 * by itself (a hook failing after the answer, an object refusing at each wake) is asked again at the next backoff while
 * it keeps being ended within `maxRetryMs` of being served — not at the first backoff each time (before: 100 ms, 100 ms,
 * 100 ms… for good, `onState` flipping at that rate). Served for `maxRetryMs` or longer, the next end starts over.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type SocketState, socketEndpoint } from "../src/browser/socket.ts";
import { AuthorizeFailed } from "../src/errors.ts";
import type { HostEndpoint, SubscriptionLost } from "../src/host/endpoint.ts";
import { manualTimer, scriptedSockets, settle } from "./socket-support.ts";

/** A host that answers every subscribe and keeps each one's `lost`, for the test to end it. */
function endingHost() {
  const ends: SubscriptionLost[] = [];
  let next = 0;
  const endpoint: HostEndpoint = {
    call: async () => "done",
    subscribe: async (_method, _args, _emit, lost) => {
      if (lost) ends.push(lost);
      return ++next;
    },
    unsubscribe: () => {},
  };
  return { ends, endpoint };
}

function page(endpoint: HostEndpoint) {
  const sockets = scriptedSockets(endpoint);
  const timer = manualTimer();
  const clock = { now: 0 };
  const states: SocketState[] = [];
  const socket = socketEndpoint(sockets.connect, {
    retryMs: 100,
    maxRetryMs: 800,
    random: () => 1,
    now: () => clock.now,
    setTimer: (fire, ms) => timer.setTimer(fire, ms),
    clearTimer: (handle) => timer.clearTimer(handle),
    onState: (state) => states.push(state),
  });
  return { sockets, timer, clock, states, socket };
}

describe("a subscription answered then ended again and again backs off (decision 0117, later)", () => {
  it("0117 later (5): ended right after each answer: asked again after 100, 200, 400, 800, 800 ms (before: 100 ms each time); served for maxRetryMs, the next end waits 100 ms again", async () => {
    const host = endingHost();
    const { timer, clock, socket } = page(host.endpoint);
    await settle();
    await socket.subscribe(
      "watchConversation",
      [1],
      () => {},
      () => {},
    );
    const waits: number[] = [];
    for (let i = 0; i < 5; i++) {
      host.ends.at(-1)!(new AuthorizeFailed("watchConversation")); // ended after its answer
      await settle();
      waits.push(timer.delays.at(-1)!);
      clock.now += timer.delays.at(-1)!;
      await timer.fire(); // asked again, answered
    }
    expect(waits).toEqual([100, 200, 400, 800, 800]);
    expect(host.ends).toHaveLength(6);
    clock.now += 800; // served for maxRetryMs
    host.ends.at(-1)!(new AuthorizeFailed("watchConversation"));
    await settle();
    expect(timer.delays.at(-1)).toBe(100);
    socket.close();
  });

  it("0117 later (5), property: however the ends and their times fall, a wait is never longer than maxRetryMs, grows while ends come within maxRetryMs of being served, and starts at the first backoff after maxRetryMs served", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 0, max: 1600 }), { minLength: 1, maxLength: 10 }), async (servedFor) => {
        const host = endingHost();
        const { timer, clock, socket } = page(host.endpoint);
        await settle();
        await socket.subscribe(
          "watchConversation",
          [1],
          () => {},
          () => {},
        );
        let expected = 0;
        for (const [at, ms] of servedFor.entries()) {
          clock.now += ms;
          host.ends.at(-1)!(new AuthorizeFailed("watchConversation"));
          await settle();
          // the first end, or one after maxRetryMs served, starts over; else the backoff goes on
          expected = at === 0 || ms >= 800 ? 100 : Math.min(800, expected * 2);
          expect(timer.delays.at(-1)).toBe(expected);
          expect(timer.pending).toBe(1);
          await timer.fire();
        }
        socket.close();
      }),
      { numRuns: 80, seed: 5 },
    );
  }, 120_000);
});
