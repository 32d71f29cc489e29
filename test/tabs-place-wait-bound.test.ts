/**
 * Decision 0146 (issue 27; 0141's and 0142's "Not done"): a call through the tabs' endpoint that waits for a place — no
 * tab has the database open and ready — waits at most `RESEND_WINDOW_MS` on the endpoint's clock, as a resend already
 * did (review of 0142, M2). Never sent, it ends `NotReady` (retryable: nothing was done, send it again); before, it
 * waited for good.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { RESEND_WINDOW_MS } from "../src/browser/tabs/retry.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { isRetryable, NotReady } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { boundedClock } from "./tabs-bounded-clock.ts";
import { macrotask, tabsTestScope, waitingOwnWorker } from "./tabs-support.ts";

const outcome = (promise: Promise<unknown>) => {
  const seen = { value: "pending", settled: 0 };
  promise.then(
    (value) => {
      seen.settled++;
      seen.value = `ok ${JSON.stringify(value)}`;
    },
    (error: Error) => {
      seen.settled++;
      seen.value = `${error.name}`;
    },
  );
  return seen;
};

const turns = async (n: number) => {
  for (let i = 0; i < n; i++) await Promise.resolve();
};

describe("a follower page's fresh call while no tab leads", () => {
  const scope = tabsTestScope();

  it("decision 0146 (the bound on the endpoint's clock): a createConversation with no leader is pending at RESEND_WINDOW_MS − 1 and fails NotReady at the bound, never sent (fails before: pending for good)", async () => {
    const database = `no-leader-${crypto.randomUUID()}`;
    const clock = boundedClock(0);
    const sent: string[] = [];
    const own = waitingOwnWorker(database); // this tab's worker waits for the lock another tab would hold
    const call = (method: string) => {
      sent.push(method);
      return new Promise(() => {});
    };
    const endpoint = tabsEndpoint({ ...own, call }, { clock });
    scope.cleanups.push(() => endpoint.close());
    for (let i = 0; i < 10; i++) await macrotask();
    const created = outcome(endpoint.call("createConversation", []));
    for (let i = 0; i < 10; i++) await macrotask();
    clock.advance(RESEND_WINDOW_MS - 1);
    for (let i = 0; i < 10; i++) await macrotask();
    expect(created.value).toBe("pending");
    clock.advance(1);
    for (let i = 0; i < 10; i++) await macrotask();
    expect(created).toEqual({ value: "NotReady", settled: 1 });
    expect(sent).toEqual([]); // never sent anywhere
  });
});

/**
 * This tab's own worker, opening (not ready) until `ready()`: then it answers every call with its method and number.
 * No broker here (no Web Locks in Node): the endpoint has no other tab to follow.
 */
function openingWorker() {
  const statuses = new Set<(status: HarnessStatus) => void>();
  const answered: number[] = [];
  const endpoint: HostEndpoint = {
    call: async (_method, args) => {
      answered.push(args[0] as number);
      return args[0] as number;
    },
    subscribe: async (method, _args, emit) => {
      if (method === "onStatus") {
        statuses.add(emit as (status: HarnessStatus) => void);
        emit({ kind: "opening", database: "db" } satisfies HarnessStatus);
      }
      return 1;
    },
    unsubscribe: () => {},
  };
  return {
    endpoint,
    answered,
    ready: () => {
      for (const emit of statuses) emit({ kind: "ready", database: "db" } as HarnessStatus);
    },
  };
}

it("decision 0146 (property over orderings): calls made while no place is ready, the place ready before or after their bounds or never, each end exactly once — answered when the place was ready within the call's window, NotReady at its bound otherwise, never both", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.integer({ min: 0, max: 2 * RESEND_WINDOW_MS }), { minLength: 1, maxLength: 5 }),
      fc.option(fc.integer({ min: 0, max: 3 * RESEND_WINDOW_MS }), { nil: undefined }),
      async (madeAt, readyAt) => {
        const clock = createManualClock(0);
        const worker = openingWorker();
        const endpoint = tabsEndpoint(worker.endpoint, { clock });
        await turns(20);
        // The events in the order of the clock: each call made, and the place becoming ready (a tie: the place first).
        const events = [...madeAt.map((at, index) => ({ at, index })), ...(readyAt === undefined ? [] : [{ at: readyAt, index: -1 }])].sort(
          (a, b) => a.at - b.at || a.index - b.index,
        );
        const seen: ReturnType<typeof outcome>[] = [];
        for (const { at, index } of events) {
          clock.advance(at - clock.now());
          await turns(20);
          if (index < 0) worker.ready();
          else seen[index] = outcome(endpoint.call("getTask", [index]));
          await turns(20);
        }
        clock.advance(3 * RESEND_WINDOW_MS - clock.now() + 1);
        await turns(40);
        for (const [index, at] of madeAt.entries()) {
          const placed = readyAt !== undefined && readyAt < at + RESEND_WINDOW_MS;
          expect(seen[index]).toEqual({ value: placed ? `ok ${index}` : "NotReady", settled: 1 });
        }
        // Answered at most once each: a call given up was never sent.
        expect([...worker.answered].sort()).toEqual(
          madeAt.flatMap((at, index) => (readyAt !== undefined && readyAt < at + RESEND_WINDOW_MS ? [index] : [])).sort(),
        );
        endpoint.close();
        expect(clock.pending).toBe(0);
      },
    ),
    { numRuns: 100 },
  );
});

it("decision 0146: a call given up at its bound is NotReady, typed and retryable, with a message that says it was not sent", async () => {
  const clock = createManualClock(0);
  const worker = openingWorker();
  const endpoint = tabsEndpoint(worker.endpoint, { clock });
  await turns(20);
  let error: unknown;
  endpoint.call("listConversations", []).catch((thrown: unknown) => (error = thrown));
  await turns(20);
  clock.advance(RESEND_WINDOW_MS);
  await turns(20);
  expect(error).toBeInstanceOf(NotReady);
  expect(isRetryable(error)).toBe(true);
  expect((error as Error).message).toMatch(/not sent to any place that could run it, and nothing was done/);
  endpoint.close();
});
