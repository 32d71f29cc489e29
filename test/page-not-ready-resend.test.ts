/**
 * Decision 0139: a page's calls of a Durable Object (`connectHarness(url)`) that the object answers `NotReady` (its
 * switch after a hand-back) are sent again by the page's client for a bounded time — a read, and a keyed write under
 * the one key it carried from its first send; never a stop or another `never` call; every other answer, a real
 * `HarnessClosed` among them, ends the call at once. Here against hostile hosts: forged and mixed answers.
 */
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { HarnessClient } from "../src/browser/client.ts";
import { NOT_READY_RESEND_MS, resendingNotReady } from "../src/browser/not-ready-resend.ts";
import { ConnectionLost, HarnessClosed, NotAuthorized, NotReady } from "../src/errors.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { isRetryable } from "../src/retryable.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { scriptedSockets } from "./socket-support.ts";
import { flush } from "./support.ts";

afterEach(() => {
  vi.useRealTimers();
});

type Answer = "value" | "NotReady" | "HarnessClosed" | "ConnectionLost" | "NotAuthorized" | "string" | "NotReadyLookalike";

const answerOf = (answer: Answer, sent: number): unknown => {
  switch (answer) {
    case "value":
      return { ok: sent };
    case "NotReady":
      return new NotReady("forged or real: between harnesses");
    case "HarnessClosed":
      return new HarnessClosed();
    case "ConnectionLost":
      return new ConnectionLost();
    case "NotAuthorized":
      return new NotAuthorized("submit", "no");
    case "string":
      return "not an error at all";
    case "NotReadyLookalike":
      return { name: "NotReady", message: "a plain object that only says so" };
  }
};

/** Which calls go again on NotReady, and where their key is (PROTOCOL's rows). */
const CALLS: Array<{ method: string; args: () => unknown[]; resent: boolean; key?: (args: unknown[]) => unknown }> = [
  {
    method: "submit",
    args: () => [1, { type: "input", content: "hi" }],
    resent: true,
    key: (a) => (a[1] as { requestId?: string }).requestId,
  },
  {
    method: "submit",
    args: () => [1, { type: "input", content: "hi", requestId: "mine" }],
    resent: true,
    key: (a) => (a[1] as { requestId?: string }).requestId,
  },
  {
    method: "decide",
    args: () => [1, "call-1", { approved: true }],
    resent: true,
    key: (a) => (a[2] as { decisionId?: string }).decisionId,
  },
  { method: "getTask", args: () => [7], resent: true },
  // Keyed but not forwarded by the next instance (review of 0139, L1): neither keyed nor sent again.
  { method: "createTask", args: () => ["report", { a: 1 }], resent: false },
  { method: "claimPageCall", args: () => [1, "call-1", { pageId: "p", claimId: "c" }], resent: false },
  { method: "abortConversation", args: () => [1], resent: false },
  { method: "createConversation", args: () => [], resent: false },
  { method: "compact", args: () => [1], resent: false },
  { method: "answerPageCall", args: () => [1, "c", "claim", { content: [] }], resent: false },
  { method: "nope", args: () => [], resent: false },
];

describe("a page's calls answered NotReady are sent again by its client (decision 0139)", () => {
  it("property (hostile host): each call settles once, as the host's last answer says; only reads and keyed writes go again, under one key, within the window; nothing after close()", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...CALLS),
        fc.array(
          fc.constantFrom<Answer>(
            "value",
            "NotReady",
            "NotReady",
            "NotReady",
            "HarnessClosed",
            "ConnectionLost",
            "NotAuthorized",
            "string",
            "NotReadyLookalike",
          ),
          {
            minLength: 1,
            maxLength: 40,
          },
        ),
        fc.integer({ min: 1_000, max: 60_000 }),
        fc.option(fc.integer({ min: 0, max: 60_000 }), { nil: undefined }),
        async (call, answers, windowMs, closeAt) => {
          const clock = createManualClock(0);
          const sends: Array<{ args: unknown[]; at: number }> = [];
          const host: HostEndpoint = {
            call: async (_method, args) => {
              const answer = answers[Math.min(sends.length, answers.length - 1)]!;
              sends.push({ args, at: clock.now() });
              if (answer === "value") return answerOf(answer, sends.length);
              throw answerOf(answer, sends.length);
            },
            subscribe: async () => 1,
            unsubscribe: () => {},
          };
          const page = resendingNotReady({ ...host, close: () => {} }, { clock, windowMs, random: () => 0.5 });
          let settled = 0;
          let outcome: { value: unknown } | { error: unknown } | undefined;
          const told = (settledWith: { value: unknown } | { error: unknown }) => {
            outcome = settledWith;
            settled++;
          };
          page.call(call.method, call.args()).then(
            (value) => told({ value }),
            (error: unknown) => told({ error }),
          );
          if (closeAt !== undefined) clock.setTimer(closeAt, () => page.close());
          for (let step = 0; step < 400 && (settled === 0 || clock.pending > 0); step++) {
            await flush(1);
            if (settled === 0 || clock.pending > 0) clock.next();
          }
          await flush(2);
          expect(settled).toBe(1);
          // Never-resent calls are sent once, as the caller gave them (no key), and answered with the host's first answer.
          if (!call.resent) {
            expect(sends).toHaveLength(1);
            expect(sends[0]!.args).toEqual(call.args());
          }
          // Each send after the first followed a NotReady (or a lost connection once a NotReady came), within the window.
          const firstNotReady = sends.findIndex((_, index) => answers[Math.min(index, answers.length - 1)] === "NotReady");
          for (let index = 1; index < sends.length; index++) {
            const before = answers[Math.min(index - 1, answers.length - 1)]!;
            expect(before === "NotReady" || (before === "ConnectionLost" && firstNotReady >= 0 && firstNotReady < index - 1)).toBe(true);
            expect(sends[index]!.at - sends[firstNotReady]!.at).toBeLessThanOrEqual(windowMs);
            if (closeAt !== undefined) expect(sends[index]!.at).toBeLessThanOrEqual(closeAt);
          }
          // One key on every send: the caller's own, or the one the client put on it before the first.
          if (call.key) {
            const keys = new Set(sends.map(({ args }) => call.key!(args)));
            expect(keys.size).toBe(1);
            expect([...keys][0]).toEqual(expect.any(String));
            if (call.method === "submit" && (call.args()[1] as { requestId?: string }).requestId) expect([...keys][0]).toBe("mine");
          }
          // What the caller got is the host's answer to the last send — but once a send after a NotReady was lost in
          // flight (it may have run), a retryable answer ("nothing was done") is ConnectionLost instead (decision 0151
          // and its review, M1; this property predates 0151, which its 100 runs seldom showed).
          const last = answerOf(answers[Math.min(sends.length - 1, answers.length - 1)]!, sends.length);
          const lostAfterNotReady = sends.some(
            (_, index) => index > firstNotReady && firstNotReady >= 0 && answers[Math.min(index, answers.length - 1)] === "ConnectionLost",
          );
          if (outcome && "value" in outcome) expect(outcome.value).toEqual(last);
          else if (lostAfterNotReady && isRetryable(last)) expect(outcome?.error).toBeInstanceOf(ConnectionLost);
          else expect(outcome?.error).toEqual(last);
          expect(page.resends).toBe(sends.length - 1);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("S12: a createTask over a URL carries no hand-over key and is not sent again on NotReady (review of 0139, L1; before: a pi.handover: key on every createTask, kept five minutes by the object)", async () => {
    const clock = createManualClock(0);
    const sends: unknown[][] = [];
    const host: HostEndpoint = {
      call: async (_method, args) => {
        sends.push(args);
        throw new NotReady("between harnesses");
      },
      subscribe: async () => 1,
      unsubscribe: () => {},
    };
    const page = resendingNotReady({ ...host, close: () => {} }, { clock });
    const outcome = page.call("createTask", ["report", { a: 1 }]).catch((error: unknown) => error);
    await flush(2);
    expect(sends).toEqual([["report", { a: 1 }]]);
    expect(await outcome).toBeInstanceOf(NotReady);
    expect(clock.pending).toBe(0);
    expect(page.resends).toBe(0);
  });

  it("S12: HarnessClient over a URL sends a Send answered NotReady again under its key, and resolves once the host makes it (before: NotReady at once)", async () => {
    vi.useFakeTimers();
    const sends: unknown[][] = [];
    const host: HostEndpoint = {
      call: async (method, args) => {
        if (method !== "submit") return null;
        sends.push(args);
        if (sends.length <= 2) throw new NotReady("the object is between its harnesses after a hand-back");
        return 42;
      },
      subscribe: async (_method, _args, emit) => {
        emit({ kind: "ready", database: "d", recovery: { stop: "clean", tasks: [] } });
        return 1;
      },
      unsubscribe: () => {},
    };
    const sockets = scriptedSockets(host);
    const client = new HarnessClient({ url: "ws://x.test/h", connect: () => sockets.connect() });
    const submitted = client.submit(1, { type: "input", content: "hi" });
    await vi.advanceTimersByTimeAsync(10_000);
    await expect(submitted).resolves.toBe(42);
    expect(sends).toHaveLength(3);
    const keys = new Set(sends.map((args) => (args[1] as { requestId?: string }).requestId));
    expect(keys.size).toBe(1);
    expect(NOT_READY_RESEND_MS).toBe(30_000);
    client.terminate();
  });
});
