/**
 * A page's calls of a Durable Object (`connectHarness(url)`) that the object answers `NotReady` are sent again by the
 * page's client, for a bounded time (decision 0139). The object answers so in its switch (src/follow/switch-answers.ts):
 * the instance that handed the lease back to a tab, its own harness closed, until its alarm ends it and the next
 * instance (which follows, and forwards a write to the tab under its key) answers. Before, the page got that closed
 * host's `HarnessClosed`, final: a second device's Send in that window lost the message.
 *
 * Which calls go again is `PROTOCOL`'s: a read (`safe`), and a keyed write the next instance forwards to the tab
 * (`keyed` and `forwarded`: submit, decide) — keyed before the first send (`withKey`), so every send carries the same
 * key and the host makes it once however many arrive. Other keyed calls (`createTask`, `claimPageCall`) are neither
 * keyed here nor sent again: the next instance does not forward them, and a task key is a document of its own the
 * object keeps five minutes (review of 0139, L1; as tabs/calls.ts keys only submit and decide on its own worker).
 * Never a stop (`abortConversation` is `never`: asked again later it
 * would stop a run started since, review of 0135, H1), nor any `never` call: the page gets the `NotReady`, retryable,
 * and decides. Once a call was answered `NotReady`, a lost connection while it is sent again (the switch ends by ending
 * the instance, which drops every socket) is sent again too; before that, `ConnectionLost` is the caller's as ever.
 * Every other error, `HarnessClosed` among them (a real close, or an object from before this), ends the call at once.
 *
 * Bounded (decision 0151): the first send waits for a connection `CALL_WAIT_MS` (60 s) at most, one sent again only
 * within the `NotReady` window; a call given up there was not sent that time. It ends `ConnectionLost` if a send of it
 * was lost in flight (it may have run), else `NotReady` (nothing was done). Once a send was lost so, every retryable
 * answer that would say "nothing was done" ends it `ConnectionLost` too: the `NotReady` window's end, 0148's
 * `TooManyCallsInFlight`, `AuthorizeFailed` (decision 0146's H1, here; review of 0151, M1).
 */
import type { Clock } from "../base/clock.ts";
import { ConnectionLost, NotReady } from "../errors.ts";
import type { HostEndpoint } from "../host/endpoint.ts";
import { isMethod, PROTOCOL } from "../host/protocol.ts";
import { isRetryable } from "../retryable.ts";
import { jitteredBackoff } from "./backoff.ts";
import { CALL_WAIT_MS, neverSent } from "./connection-wait.ts";
import { retried, withKey } from "./tabs/retry.ts";

/**
 * How long after its first `NotReady` a call is sent again: one lease's time (`DEFAULT_LEASE_TTL_MS`), as the follow
 * link's `notReadyPassesMs` (decision 0135): an object that stays between harnesses ends the call, it does not wait for good.
 */
export const NOT_READY_RESEND_MS = 30_000;

export interface NotReadyResendOptions {
  /** The clock the waits run on. */
  clock: Clock;
  /** How long after its first `NotReady` a call is sent again. Default `NOT_READY_RESEND_MS`. */
  windowMs?: number;
  /** How long from when it was made a call waits for a connection (decision 0151). Default `CALL_WAIT_MS` (60 s). */
  callWaitMs?: number;
  /** The first wait before a resend; doubling to `maxRetryMs`, each drawn from its upper half. Default 250 ms. */
  retryMs?: number;
  /** The longest wait between two sends. Default 4,000 ms. */
  maxRetryMs?: number;
  random?: () => number;
}

/**
 * Whether `method`, sent as `sent`, goes again after a `NotReady` answer (see above): a `safe` call, or a keyed one the
 * object's next instance forwards (`submit`, `decide`) that carries its key. The tabs' endpoint reads it too (decision
 * 0146: a page on a worker whose follow link gave up on the object's switch).
 */
export function resentOnNotReady(method: string, sent: unknown[]): boolean {
  const row = isMethod(method) ? PROTOCOL[method] : undefined;
  if (row?.retry === "keyed" && !row.forwarded) return false;
  return retried(method, sent);
}

/**
 * The end of a call answered `NotReady` at each of its `sends`, whose next send found no connection before its window's
 * end: every send was answered, none ran.
 */
function resentUnsent(sends: number, windowMs: number): NotReady {
  return new NotReady(
    `This call was sent ${sends} time${sends === 1 ? "" : "s"} and answered not ready each time (not run), and its next send found no connection to the host within ${Math.round(windowMs / 1000)} s of the first such answer: nothing was done. The page reconnects by itself: send it again once the status is ready.`,
  );
}

/**
 * What a call ends with when its place answered `error`: once a send of it may have run (lost in flight), an answer that
 * says "nothing was done, send it again" (`isRetryable`: `NotReady`, `TooManyCallsInFlight`, `AuthorizeFailed`…) is
 * `ConnectionLost` instead — sent again by the app under a new key, it could be made twice (review of 0151, M1). The
 * socket's resend below and the tabs' calls (./tabs/calls.ts) both end so.
 */
export function answerAfterLoss(error: unknown, mayHaveRun: boolean): unknown {
  return mayHaveRun && isRetryable(error) ? new ConnectionLost() : error;
}

/** An endpoint whose `call` may be told how long it waits for a connection (the socket's, ./socket.ts). */
export interface WaitingEndpoint extends HostEndpoint {
  call(method: string, args: unknown[], waitMs?: number): Promise<unknown>;
  close?: () => void;
}

/** `endpoint` whose calls answered `NotReady` are sent again (see above); `resends` counts the sends again. */
export function resendingNotReady<E extends WaitingEndpoint>(
  endpoint: E,
  options: NotReadyResendOptions,
): E & { readonly resends: number } {
  const { clock } = options;
  const windowMs = options.windowMs ?? NOT_READY_RESEND_MS;
  const callWaitMs = options.callWaitMs ?? CALL_WAIT_MS;
  const retryMs = options.retryMs ?? 250;
  const maxRetryMs = Math.max(retryMs, options.maxRetryMs ?? 4_000);
  const random = options.random ?? Math.random;
  let resends = 0;
  let closed = false;
  const pause = (attempt: number, left: number) => {
    const wait = Math.min(left, jitteredBackoff(attempt, retryMs, maxRetryMs, random));
    return new Promise<void>((resume) => clock.setTimer(wait, resume));
  };
  const call = async (method: string, args: unknown[]): Promise<unknown> => {
    const started = clock.now();
    const sent = withKey(method, args);
    if (!resentOnNotReady(method, sent)) return endpoint.call(method, args, callWaitMs);
    let since: number | undefined; // when the host first answered NotReady
    /** A send of it was lost in flight (after a `NotReady`): it may have run; never cleared. */
    let mayHaveRun = false;
    /**
     * How the call ends with `error`: once a send of it was lost in flight (it may have run), any answer that says
     * "nothing was done, send it again" (`isRetryable`: `NotReady`, 0148's `TooManyCallsInFlight`, `AuthorizeFailed`…)
     * is `ConnectionLost` instead (review of 0151, M1: before, only `NotReady`; the app sent the others again under a
     * new key, and the submit could be made twice). An answer that is not retryable is the host's about this very key.
     */
    const end = (error: unknown) => answerAfterLoss(error, mayHaveRun);
    for (let attempt = 0; ; attempt++) {
      // The first send waits for a connection within the call's bound; a send again within the `NotReady` window.
      const until = since === undefined ? started + callWaitMs : since + windowMs;
      try {
        return await endpoint.call(method, sent, until - clock.now());
      } catch (error) {
        // Not sent this time (no connection by the bound): nothing more of it was done. One answered `NotReady` before
        // was sent: its message says so (review of 0151, L2: before, "waited 0 s … it was not sent").
        if (neverSent(error)) throw since === undefined || mayHaveRun ? end(error) : resentUnsent(attempt, windowMs);
        const passing = error instanceof NotReady || (since !== undefined && error instanceof ConnectionLost);
        if (!passing || closed) throw end(error);
        if (error instanceof ConnectionLost) mayHaveRun = true;
        since ??= clock.now();
        const left = since + windowMs - clock.now();
        if (left <= 0) throw end(error);
        await pause(attempt, left);
        if (closed) throw end(error);
        resends++;
      }
    }
  };
  return Object.create(endpoint, {
    call: { value: call },
    subscribe: { value: endpoint.subscribe.bind(endpoint) },
    unsubscribe: { value: endpoint.unsubscribe.bind(endpoint) },
    close: {
      value: () => {
        closed = true;
        endpoint.close?.();
      },
    },
    resends: { get: () => resends },
  });
}
