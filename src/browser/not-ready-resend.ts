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
 */
import type { Clock } from "../base/clock.ts";
import { ConnectionLost, NotReady } from "../errors.ts";
import type { HostEndpoint } from "../host/endpoint.ts";
import { isMethod, PROTOCOL } from "../host/protocol.ts";
import { jitteredBackoff } from "./backoff.ts";
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

/** `endpoint` whose calls answered `NotReady` are sent again (see above); `resends` counts the sends again. */
export function resendingNotReady<E extends HostEndpoint & { close?: () => void }>(
  endpoint: E,
  options: NotReadyResendOptions,
): E & { readonly resends: number } {
  const { clock } = options;
  const windowMs = options.windowMs ?? NOT_READY_RESEND_MS;
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
    const sent = withKey(method, args);
    if (!resentOnNotReady(method, sent)) return endpoint.call(method, args);
    let since: number | undefined; // when the host first answered NotReady
    for (let attempt = 0; ; attempt++) {
      try {
        return await endpoint.call(method, sent);
      } catch (error) {
        const passing = error instanceof NotReady || (since !== undefined && error instanceof ConnectionLost);
        if (!passing || closed) throw error;
        since ??= clock.now();
        const left = since + windowMs - clock.now();
        if (left <= 0) throw error;
        await pause(attempt, left);
        if (closed) throw error;
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
