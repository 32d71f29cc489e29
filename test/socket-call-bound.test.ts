/**
 * Decision 0151: a page's call over the socket (`connectHarness(url)`: src/browser/socket.ts, with the client's
 * `resendingNotReady` over it) waits for a connection `CALL_WAIT_MS` (60 s) at most. Never sent by then: `NotReady`
 * ("not sent, nothing was done"), and the connection that comes later never carries it. Sent and lost with its
 * connection: `ConnectionLost` ("may or may not have run") — never `NotReady` once a send of it may have run (decision
 * 0146's H1). Every timer here is the test's manual clock; nothing waits on the wall clock.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CALL_WAIT_MS, neverSent } from "../src/browser/connection-wait.ts";
import { NOT_READY_RESEND_MS, resendingNotReady } from "../src/browser/not-ready-resend.ts";
import { socketEndpoint } from "../src/browser/socket.ts";
import { TooManyCallsInFlight } from "../src/errors/wire.ts";
import { ConnectionLost, NotReady } from "../src/errors.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { isRetryable } from "../src/retryable.ts";
import { createManualClock, type ManualClock } from "../src/testing/clock.ts";
import { scriptedSockets, settle } from "./socket-support.ts";

type Answer = "ok" | "notReady" | "hang" | "busy";

/** A host that records every call it receives and answers each as `answer` says then (`hang`: until its connection drops). */
function recordingHost(answer: (method: string, args: unknown[]) => Answer = () => "ok") {
  const received: Array<{ method: string; args: unknown[] }> = [];
  const endpoint: HostEndpoint = {
    call: async (method, args) => {
      received.push({ method, args });
      const now = answer(method, args);
      if (now === "notReady") throw new NotReady("the object is between its harnesses");
      if (now === "busy") throw new TooManyCallsInFlight(method, 64); // 0148: "nothing was done", retryable
      if (now === "hang") return new Promise(() => {});
      return `answer ${received.length}`;
    },
    subscribe: async () => 1,
    unsubscribe: () => {},
  };
  return { endpoint, received };
}

/** The page's socket (and the client's resend over it) on `clock`, connected once `settle()` ran. */
function pageOn(clock: ManualClock, host: HostEndpoint) {
  const sockets = scriptedSockets(host);
  const socket = socketEndpoint(sockets.connect, {
    retryMs: 500,
    maxRetryMs: 10_000,
    random: () => 1,
    setTimer: (fire, ms) => clock.setTimer(ms, fire),
    clearTimer: (cancel) => (cancel as () => void)(),
    now: clock.now,
  });
  const page = resendingNotReady(socket, { clock, random: () => 1 });
  return { sockets, socket, page };
}

function outcome(call: Promise<unknown>, clock: ManualClock) {
  const seen: { value?: unknown; error?: Error; settled: number; at?: number } = { settled: 0 };
  call.then(
    (value) => Object.assign(seen, { value, settled: seen.settled + 1, at: clock.now() }),
    (error: Error) => Object.assign(seen, { error, settled: seen.settled + 1, at: clock.now() }),
  );
  return seen;
}

/** Lets every queued frame, open and answer run (the scripted sockets deliver them in microtasks). */
async function flush() {
  for (let i = 0; i < 60; i++) await Promise.resolve();
}

/** Moves the clock by `ms` in steps of at most `step`, letting frames, opens and answers run between steps. */
async function pass(clock: ManualClock, ms: number, step = 1_000) {
  for (let left = ms; left > 0; left -= step) {
    clock.advance(Math.min(step, left));
    await flush();
  }
}

describe("0151: a call on a socket that is down ends NotReady at its bound, never sent", () => {
  it("S4 (a page's call ends): pending at CALL_WAIT_MS − 1, NotReady 'not sent' at the bound; the connection that comes back later never carries it (fails before: pending for good, then sent)", async () => {
    const clock = createManualClock(0);
    const host = recordingHost();
    const { sockets, socket } = pageOn(clock, host.endpoint);
    await settle();
    sockets.failAttempts(1_000_000);
    sockets.drop();
    await settle();
    const call = outcome(socket.call("getTask", ["t1"]), clock);
    await pass(clock, CALL_WAIT_MS - 1);
    expect(call.settled).toBe(0);
    await pass(clock, 1);
    expect(call.settled).toBe(1);
    expect(call.error).toBeInstanceOf(NotReady);
    expect(neverSent(call.error)).toBe(true);
    expect(call.error?.message).toMatch(/waited 60 s for a connection.*not sent, and nothing was done/);
    sockets.failAttempts(0);
    await pass(clock, 30_000);
    expect(socket.connections).toBe(2);
    expect(host.received).toEqual([]); // never sent, not at the reconnect either
    expect(await socket.call("getTask", ["t2"])).toBe("answer 1");
    expect(call.settled).toBe(1);
    socket.close();
  });

  it("S4: a keyed submit through the client's resend on a socket that is down ends NotReady at CALL_WAIT_MS, sent nowhere and never resent (fails before: pending for good)", async () => {
    const clock = createManualClock(0);
    const host = recordingHost();
    const { sockets, socket, page } = pageOn(clock, host.endpoint);
    await settle();
    sockets.failAttempts(1_000_000);
    sockets.drop();
    await settle();
    const call = outcome(page.call("submit", ["c1", { content: "hello" }]), clock);
    await pass(clock, CALL_WAIT_MS - 1);
    expect(call.settled).toBe(0);
    await pass(clock, 1);
    expect(call.error).toBeInstanceOf(NotReady);
    expect(call.at).toBe(CALL_WAIT_MS);
    sockets.failAttempts(0);
    await pass(clock, 2 * NOT_READY_RESEND_MS);
    expect(socket.connections).toBe(2);
    expect(host.received).toEqual([]);
    expect(page.resends).toBe(0);
    page.close();
  });

  it("S4: a read answered NotReady, whose socket then stays down, is sent again only within the NotReady window: NotReady at NOT_READY_RESEND_MS saying it was sent once and answered not ready (review of 0151, L2), sent once (fails before: the resend waited for a connection for good)", async () => {
    const clock = createManualClock(0);
    const host = recordingHost(() => "notReady");
    const { sockets, page } = pageOn(clock, host.endpoint);
    await settle();
    const call = outcome(page.call("getTask", ["t1"]), clock);
    await settle();
    expect(host.received).toHaveLength(1);
    sockets.failAttempts(1_000_000);
    sockets.drop();
    await pass(clock, NOT_READY_RESEND_MS - 1, 500);
    expect(call.settled).toBe(0);
    await pass(clock, 1);
    expect(call.settled).toBe(1);
    expect(call.error).toBeInstanceOf(NotReady);
    expect(call.error?.message).toContain("sent 1 time and answered not ready");
    sockets.failAttempts(0);
    await pass(clock, 60_000);
    expect(host.received).toHaveLength(1);
    page.close();
  });
});

describe("0151: a call in flight when its connection drops", () => {
  it("S4: a call in flight when the socket drops ends ConnectionLost at once (it may have run), and is not sent again (the socket's own behaviour, kept)", async () => {
    const clock = createManualClock(0);
    const host = recordingHost(() => "hang");
    const { sockets, page } = pageOn(clock, host.endpoint);
    await settle();
    const call = outcome(page.call("submit", ["c1", { content: "hello" }]), clock);
    await settle();
    expect(host.received).toHaveLength(1);
    sockets.drop();
    await settle();
    expect(call.error).toBeInstanceOf(ConnectionLost);
    await pass(clock, 2 * CALL_WAIT_MS);
    expect(host.received).toHaveLength(1);
    page.close();
  });

  it("S4 (the page told the truth, 0146's H1): a submit answered NotReady, sent again and lost in flight, then answered NotReady until its window ends, ends ConnectionLost — not NotReady 'nothing was done' (fails before: NotReady)", async () => {
    const clock = createManualClock(0);
    let sends = 0;
    const host = recordingHost(() => (++sends === 2 ? "hang" : "notReady"));
    const { sockets, page } = pageOn(clock, host.endpoint);
    await settle();
    const call = outcome(page.call("submit", ["c1", { content: "hello" }]), clock);
    await settle();
    expect(host.received).toHaveLength(1);
    await pass(clock, 250, 50); // the backoff: sent again, and the host holds it
    expect(host.received).toHaveLength(2);
    sockets.drop(); // lost with it in flight: it may have run
    await pass(clock, NOT_READY_RESEND_MS, 250);
    expect(call.settled).toBe(1);
    expect(call.error).toBeInstanceOf(ConnectionLost);
    const keys = new Set(host.received.map((sent) => (sent.args[1] as { requestId?: string }).requestId));
    expect(keys.size).toBe(1); // one key across every send
    page.close();
  });
});

describe("0151 property: any run of socket drops, comebacks and answers", () => {
  it("S4 (fast-check): every call ends exactly once, by its bound once its connection is down; never NotReady (nor any retryable answer but ConnectionLost) once a send of it may have run; never sent after it ended; one key per submit", async () => {
    const step = fc.oneof(
      fc.record({ kind: fc.constant("call" as const), method: fc.constantFrom("getTask", "submit", "createConversation") }),
      fc.record({ kind: fc.constant("down" as const) }),
      fc.record({ kind: fc.constant("up" as const) }),
      fc.record({ kind: fc.constant("wait" as const), ms: fc.integer({ min: 0, max: 40_000 }) }),
    );
    const answers = fc.array(fc.constantFrom<Answer>("ok", "notReady", "hang", "busy"), { minLength: 1, maxLength: 8 });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 12 }), answers, async (steps, script) => {
        const clock = createManualClock(0);
        let n = 0;
        /** Per call (its first argument), how and when each of its sends was answered. */
        const sendsOf = new Map<string, Array<{ answer: Answer; at: number }>>();
        const host = recordingHost((_method, args) => {
          const answer = script[n++ % script.length]!;
          const id = String(args[0]);
          sendsOf.set(id, [...(sendsOf.get(id) ?? []), { answer, at: clock.now() }]);
          return answer;
        });
        const { sockets, page } = pageOn(clock, host.endpoint);
        await settle();
        const calls: Array<{ id: string; made: number; seen: ReturnType<typeof outcome> }> = [];
        for (const [index, now] of steps.entries()) {
          if (now.kind === "call") {
            const id = `call-${index}`;
            const args = now.method === "getTask" ? [id] : [id, { content: "x" }];
            calls.push({ id, made: clock.now(), seen: outcome(page.call(now.method, args), clock) });
          } else if (now.kind === "down") {
            sockets.failAttempts(1_000_000);
            sockets.drop();
          } else if (now.kind === "up") sockets.failAttempts(0);
          else await pass(clock, now.ms, 50);
          await flush();
        }
        // Every call ended by now: the socket goes down for good, and no bound is longer than the call's plus a window.
        sockets.failAttempts(1_000_000);
        sockets.drop();
        const received = host.received.length;
        await pass(clock, CALL_WAIT_MS + NOT_READY_RESEND_MS + 10_000, 50);
        expect(host.received.length).toBe(received); // nothing sent while down
        for (const call of calls) {
          expect(call.seen.settled).toBe(1);
          const sends = sendsOf.get(call.id) ?? [];
          // A send the host held until its connection dropped may have run: never NotReady then.
          // Nor any retryable "nothing was done" (TooManyCallsInFlight after it: review of 0151, M1): ConnectionLost.
          if (sends.some((send) => send.answer === "hang") && isRetryable(call.seen.error))
            expect(call.seen.error).toBeInstanceOf(ConnectionLost);
          if (call.seen.error instanceof NotReady && neverSent(call.seen.error) && sends.length === 0) {
            // Never sent: at its bound, not before (seen within the step the clock moved by).
            expect(call.seen.at).toBeGreaterThanOrEqual(call.made + CALL_WAIT_MS);
            expect(call.seen.at).toBeLessThanOrEqual(call.made + CALL_WAIT_MS + 50);
          }
          for (const send of sends) expect(send.at).toBeLessThanOrEqual(call.seen.at!); // never sent after it ended
        }
        for (const id of new Set(host.received.map((sent) => String(sent.args[0])))) {
          const keys = host.received
            .filter((sent) => String(sent.args[0]) === id && sent.method !== "getTask")
            .map((sent) => JSON.stringify(sent.args[1]));
          expect(new Set(keys).size).toBeLessThanOrEqual(1);
        }
        page.close();
      }),
      { numRuns: 100 },
    );
  });
});
