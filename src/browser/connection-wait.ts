/**
 * How long a page's call over the socket (./socket.ts, `connectHarness(url)`) waits for a connection (decision 0151):
 * at most `waitMs` from when it was made, on the socket's timers. Then it ends `NotReady`, marked as never sent: no
 * connection took it, so nothing was done, and it is sent nowhere later (the reconnect does not carry it). A call sent
 * and lost with its connection is the socket's `ConnectionLost` as before ("it may or may not have run").
 */
import { NotReady } from "../errors.ts";
import { RESEND_WINDOW_MS } from "./tabs/retry.ts";

/** How long a page's call waits for a connection by default: the tabs' bound for a call waiting for a place (0146). */
export const CALL_WAIT_MS = RESEND_WINDOW_MS;

/** The errors of calls that were never sent (`neverSent`): a resend loop (./not-ready-resend.ts) ends on them. */
const unsent = new WeakSet<Error>();

/** Whether `error` is a socket call's own "no connection in time" (never sent), not a host's `NotReady` answer. */
export const neverSent = (error: unknown): boolean => error instanceof Error && unsent.has(error);

/** The `NotReady` of a call that waited `waitedMs` for a connection and was not sent. */
export function notSent(waitedMs: number): NotReady {
  const error = new NotReady(
    `This call waited ${Math.round(Math.max(0, waitedMs) / 1000)} s for a connection to the host and none came: it was not sent, and nothing was done. The page reconnects by itself: send it again once the status is ready.`,
  );
  unsent.add(error);
  return error;
}

/** The timers a wait runs on (the socket's own: `setTimeout` in a page, a test's manual clock). */
export interface WaitTimers {
  setTimer(fire: () => void, ms: number): unknown;
  clearTimer(timer: unknown): void;
}

/**
 * `awaitLink()`'s link, or `notSent` once `waitMs` passed without it: whichever comes first wins, and a link that comes
 * later is not used (the caller's send never runs). The link's own rejection (the socket closed) passes through. No
 * time left (`waitMs` ≤ 0): `notSent` at once, and no link is waited for (review of 0151, L1: before, the link's promise
 * was made and left unhandled, and a later `close()` rejected it with nobody listening).
 */
export function within<T>(awaitLink: () => Promise<T>, waitMs: number, timers: WaitTimers): Promise<T> {
  if (waitMs <= 0) return Promise.reject(notSent(waitMs));
  const link = awaitLink();
  return new Promise<T>((resolve, reject) => {
    let done = false;
    const timer = timers.setTimer(() => {
      if (done) return;
      done = true;
      reject(notSent(waitMs));
    }, waitMs);
    const settle = (finish: () => void) => {
      if (done) return;
      done = true;
      timers.clearTimer(timer);
      finish();
    };
    link.then(
      (value) => settle(() => resolve(value)),
      (error: unknown) => settle(() => reject(error)),
    );
  });
}
