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
      { state: "unserved", attempt: 1, retryInMs: 100 },
    ]);
    await timer.fire();
    await timer.fire(); // both at attempt 2
    expect(states.at(-1)).toEqual({ state: "unserved", attempt: 2, retryInMs: 200 });
    expect(repeats(states)).toEqual([]);
    socket.close();
  });

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
