/**
 * Decision 0117, second review (M-a): the tabs' endpoint re-asks a subscription its place could not serve after a
 * backoff — with one timer per subscription. Before, each re-ask started a timer it kept no handle to: a status flap
 * (ready → opening → ready) while one waited added a second chain, and the subscription was asked twice as often; and
 * a wait outlived unsubscribe() and close().
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { AuthorizeFailed } from "../src/errors.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";

const flush = async () => {
  for (let i = 0; i < 20; i++) await Promise.resolve();
};

function fakeOwn() {
  let statusEmit: ((v: unknown) => void) | undefined;
  const state = { failing: false, asked: 0, lastId: 0 };
  const own: HostEndpoint = {
    call: async () => null,
    subscribe: async (method, _args, emit) => {
      if (method === "onStatus") {
        statusEmit = emit;
        emit({ kind: "ready", database: "db" });
        return ++state.lastId;
      }
      state.asked++;
      if (state.failing) throw new AuthorizeFailed("watchConversation");
      return ++state.lastId;
    },
    unsubscribe: () => {},
  };
  return { own, state, status: (s: HarnessStatus) => statusEmit?.(s) };
}

/** The database reopens in its place: the watch moves there (and its door's hook throws, while failing). */
const reopen = async (status: (s: HarnessStatus) => void) => {
  status({ kind: "opening", database: "db" } as HarnessStatus);
  status({ kind: "ready", database: "db" } as HarnessStatus);
  await flush();
};

afterEach(() => vi.useRealTimers());

describe("decision 0117 second review (M-a): the tabs' endpoint waits once per unserved subscription", () => {
  it("S8: a status flap while a re-ask waits replaces that wait — one timer, one ask per period", async () => {
    vi.useFakeTimers();
    const { own, state, status } = fakeOwn();
    const tabs = tabsEndpoint(own);
    await flush();
    await tabs.subscribe("watchConversation", [1], () => {});
    state.failing = true;
    await reopen(status); // refused as unservable: a wait of 500 ms
    expect(vi.getTimerCount()).toBe(1);
    await reopen(status); // asked again at the move, unservable again: the wait is replaced (1000 ms), not doubled
    expect(vi.getTimerCount()).toBe(1);
    const before = state.asked;
    await vi.advanceTimersByTimeAsync(1000);
    await flush();
    expect(state.asked - before).toBe(1);
    expect(vi.getTimerCount()).toBe(1);
    tabs.close();
  });

  it("S8: unsubscribe() and close() end the wait (no timer left)", async () => {
    vi.useFakeTimers();
    const { own, state, status } = fakeOwn();
    const tabs = tabsEndpoint(own);
    await flush();
    const id = await tabs.subscribe("watchConversation", [1], () => {});
    const other = await tabs.subscribe("watchConversation", [2], () => {});
    state.failing = true;
    await reopen(status);
    expect(vi.getTimerCount()).toBe(2);
    await tabs.unsubscribe(id);
    expect(vi.getTimerCount()).toBe(1);
    tabs.close();
    expect(vi.getTimerCount()).toBe(0);
    const asked = state.asked;
    await vi.advanceTimersByTimeAsync(20_000);
    expect(state.asked).toBe(asked);
    void other;
  });
});
