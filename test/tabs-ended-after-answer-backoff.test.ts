/**
 * Decision 0117, later (item 5 on the tabs' endpoint, as on the socket): a subscription the worker's place answers and
 * then ends with what passes by itself keeps backing off while it keeps being ended within 10 s of being served —
 * 500, 1000, 2000 ms… (before: 500 ms each time, the page's status flipping at that rate) — and starts over once it
 * was served that long. And a subscription given up (`cancel()`) while it waited ends its wait: the page's status is the
 * place's again (before: `reconnecting` for good).
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { AuthorizeFailed } from "../src/errors.ts";
import type { HostEndpoint, SubscriptionLost } from "../src/host/endpoint.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";

const flush = async () => {
  for (let i = 0; i < 20; i++) await Promise.resolve();
};

/** This tab's worker: ready, answering every watch, each watch's `lost` kept for the test to end it. */
function endingOwn() {
  const ends: SubscriptionLost[] = [];
  const state = { failing: false, lastId: 0 };
  const own: HostEndpoint = {
    call: async () => null,
    subscribe: async (method, _args, emit, lost) => {
      if (method === "onStatus") {
        emit({ kind: "ready", database: "db" });
        return ++state.lastId;
      }
      if (state.failing) throw new AuthorizeFailed("watchConversation");
      if (lost) ends.push(lost);
      return ++state.lastId;
    },
    unsubscribe: () => {},
  };
  return { own, ends, state };
}

afterEach(() => vi.useRealTimers());

describe("the tabs' endpoint: a subscription ended again and again backs off (decision 0117, later)", () => {
  it("0117 later (5): ended right after each answer: waits 500, 1000, 2000, 4000 ms (before: 500 each time); served 10 s, the next end waits 500 again", async () => {
    vi.useFakeTimers();
    const { own, ends } = endingOwn();
    const tabs = tabsEndpoint(own);
    const statuses: HarnessStatus[] = [];
    await tabs.subscribe("onStatus", [], (status) => statuses.push(status as HarnessStatus));
    await flush();
    await tabs.subscribe(
      "watchConversation",
      [1],
      () => {},
      () => {},
    );
    const waits: number[] = [];
    for (let i = 0; i < 4; i++) {
      ends.at(-1)!(new AuthorizeFailed("watchConversation")); // the place ended it after its answer
      await flush();
      const now = statuses.at(-1) as { kind: string; retryInMs?: number };
      expect(now.kind).toBe("reconnecting");
      waits.push(now.retryInMs!);
      await vi.advanceTimersByTimeAsync(now.retryInMs!);
      await flush();
      expect(statuses.at(-1)?.kind).toBe("ready"); // asked again, served
    }
    expect(waits).toEqual([500, 1000, 2000, 4000]);
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(10_000); // served that long
    ends.at(-1)!(new AuthorizeFailed("watchConversation"));
    await flush();
    expect(statuses.at(-1)).toMatchObject({ kind: "reconnecting", attempt: 1, retryInMs: 500 });
    tabs.close();
  });

  it("0117 later: cancel() on a subscription while it waits ends its wait — no timer left, the status ready again (before: reconnecting for good)", async () => {
    vi.useFakeTimers();
    const { own, ends } = endingOwn();
    const tabs = tabsEndpoint(own);
    const statuses: HarnessStatus[] = [];
    await tabs.subscribe("onStatus", [], (status) => statuses.push(status as HarnessStatus));
    await flush();
    const watching = tabs.subscribe(
      "watchConversation",
      [1],
      () => {},
      () => {},
    );
    await watching;
    ends.at(-1)!(new AuthorizeFailed("watchConversation"));
    await flush();
    expect(statuses.at(-1)?.kind).toBe("reconnecting");
    (watching as unknown as { cancel(): void }).cancel();
    await flush();
    expect(statuses.at(-1)?.kind).toBe("ready");
    expect(vi.getTimerCount()).toBe(0);
    tabs.close();
  });
});
