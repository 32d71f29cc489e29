/**
 * A call through the tabs' endpoint (./follower.ts): sent where the database is — this tab's own worker (`OWN`) or the
 * leader tab's over a link — and sent again, where that is safe, when the place went with it in flight.
 */
import type { Clock } from "../../base/clock.ts";
import { ConnectionLost, NotReady } from "../../errors.ts";
import type { HostEndpoint } from "../../host/endpoint.ts";
import { jitteredBackoff } from "../backoff.ts";
import { answerAfterLoss, NOT_READY_RESEND_MS, resentOnNotReady } from "../not-ready-resend.ts";
import type { Link } from "./link.ts";
import { isLoss, RESEND_WINDOW_MS, retried, withKey } from "./retry.ts";

export const OWN = "own" as const;
export type Target = typeof OWN | Link;

/**
 * What an attempt asks for: a watch's first or later attempt; a call's first attempt or its resend (both to this tab's
 * worker first while the page cannot see its status: its door decides every call, review of 0142 M1); or a call that
 * worker answered it waits for the database another tab has (`forward`: sent there, its own door having let it by).
 */
export type Way = "watch" | "watch-again" | "call" | "resend" | "forward";

/** What a call needs of the endpoint. */
export interface CallRoute {
  clock: Clock;
  /**
   * Where the attempt goes now; waits until there is such a place, until `bound.until` at most: then it rejects with
   * `bound.giveUp()` (`notPlaced`: `ConnectionLost` for a call that may have run, `NotReady` for one that did not).
   */
  next(way: Way, bound?: Bound): Promise<Target>;
  /** Resolves after `ms` on the clock; rejects at the endpoint's close. */
  pause(ms: number): Promise<void>;
  /** The backoff's draws (`Math.random` by default; a test's own). */
  random?: () => number;
  endpointOf(target: Target): HostEndpoint;
  /**
   * Whether this tab's worker failed the call because the database left it (taken over): sent again, where it went. Waits
   * for that worker's status to leave `ready`, a short grace from the answer at most, then rejects `ConnectionLost`; so
   * at the endpoint's close (./own-left.ts; decision 0151 and its review).
   */
  ownLost(error: unknown): Promise<boolean>;
  lose(link: Link): void;
  /**
   * Whether this tab's worker answered that it waits for the database another tab has (the host's own "not open",
   * decision 0142): the call, applied nowhere, goes there as the same attempt.
   */
  waitsElsewhere(error: unknown): boolean;
}

/** How long an attempt waits for a place, and the error it ends with then. */
export interface Bound {
  until: number;
  giveUp: () => Error;
}

/** The backoff between two sends of one call (after `NotReady`, or to the place that just failed it): 250 ms to 4 s. */
const backoff = (step: number, random: () => number) => jitteredBackoff(step, 250, 4_000, random);

export async function sendCall(route: CallRoute, method: string, args: unknown[]): Promise<unknown> {
  const { clock } = route;
  const random = route.random ?? Math.random;
  let sent = args;
  const started = clock.now();
  let forward = false;
  /**
   * Whether a place went with this call in flight (a loss), so that it may have run: set at every loss and never
   * cleared. A call given up ends `ConnectionLost` then, whatever way it waits (review of 0146, H1: before, a resend
   * this tab's worker sent on as `forward` ended `NotReady`, "not sent and nothing was done").
   */
  let mayHaveRun = false;
  /** When a place first answered this call `NotReady` (decision 0146). */
  let notReadySince: number | undefined;
  /** The place that just failed this call ("not open", or lost): sent there again only after a pause (review of 0146, M1). */
  let failedAt: Target | undefined;
  let pauses = 0;
  for (;;) {
    const way: Way = forward ? "forward" : mayHaveRun ? "resend" : "call";
    // Every attempt waits for a place within the call's window (decision 0146); one sent again after `NotReady` within
    // that one's too, unless it may have run (past the window the harness may have let its hand-over key expire,
    // decision 0022).
    const until =
      mayHaveRun || notReadySince === undefined
        ? started + RESEND_WINDOW_MS
        : Math.max(started + RESEND_WINDOW_MS, notReadySince + NOT_READY_RESEND_MS);
    const bound: Bound = {
      until,
      giveUp: () => notPlaced({ mayHaveRun, answeredNotReady: notReadySince !== undefined, waitedMs: until - started }),
    };
    // The whole loop ends at the bound, whatever the places answer (review of 0146, M1).
    if (clock.now() >= until) throw bound.giveUp();
    const target = await route.next(way, bound);
    if (mayHaveRun && clock.now() - started > RESEND_WINDOW_MS) throw new ConnectionLost();
    // Sent again where it just failed (a worker `ready` that answers "not open", its status lagging or wrong; a worker
    // that keeps losing it): after a backoff, and the place picked again then. Before, it went again at once, for good.
    if (target === failedAt) {
      failedAt = undefined;
      await route.pause(Math.min(until - clock.now(), backoff(pauses++, random)));
      continue;
    }
    failedAt = undefined;
    // Keys: every follower call that creates or decides; on this tab's own worker, submissions and decisions
    // only (a submission's key is a column of its row, a decision's a field of its approval record; a task
    // key is a document of its own, kept five minutes for a follower, decision 0022).
    if (target !== OWN || method === "submit" || method === "decide") sent = withKey(method, sent);
    forward = false;
    try {
      return await route.endpointOf(target).call(method, sent);
    } catch (error) {
      // Applied nowhere (the host's own answer, review of 0142 L1: also once the status became visible meanwhile).
      if (target === OWN && route.waitsElsewhere(error)) {
        forward = true;
        failedAt = OWN;
        continue;
      }
      // The place answered NotReady: its worker's follow link gave up on the object's switch (decisions 0135, 0139).
      // A read, or a write the object forwards under the key it carries from the first send, goes again after a backoff
      // for `NOT_READY_RESEND_MS`, as a page on the object does (./not-ready-resend.ts); a stop or a call never sent
      // again (`createTask`, `claimPageCall`, `never`) is the caller's `NotReady`: nothing was applied.
      if (error instanceof NotReady && resentOnNotReady(method, sent)) {
        const now = clock.now();
        notReadySince ??= now;
        const left = notReadySince + NOT_READY_RESEND_MS - now;
        // One a place went with earlier may have run there: not the place's "not ready" then (review of 0146, H1).
        if (left <= 0) throw mayHaveRun ? new ConnectionLost() : error;
        await route.pause(Math.min(left, backoff(pauses++, random)));
        continue;
      }
      // The place's own answer: `ConnectionLost` instead of a "nothing was done" once a place went with this call.
      if (target === OWN ? !(await route.ownLost(error)) : !isLoss(error)) throw answerAfterLoss(error, mayHaveRun);
      if (target !== OWN) route.lose(target);
      if (!retried(method, sent)) throw new ConnectionLost();
      mayHaveRun = true;
      failedAt = target;
    }
  }
}

/** What `notPlaced` needs to know of a call given up. */
export interface Unplaced {
  /** A place went with it in flight. */
  mayHaveRun: boolean;
  /** A place answered it `NotReady` (not run there) at least once. */
  answeredNotReady: boolean;
  /** How long after it was made it was given up. */
  waitedMs: number;
}

/**
 * Why a call that waited for a place and found none ends: `ConnectionLost` ("may or may not have run") when a place went
 * with it in flight, whatever way it waited then; `NotReady` (retryable) when it never ran anywhere — never sent to a
 * place that could run it (a first attempt, or one this tab's worker answered that it waits for the database elsewhere),
 * or sent and answered not ready each time. Its message says which, and the time it waited (review of 0146, L1).
 */
export function notPlaced(call: Unplaced): Error {
  if (call.mayHaveRun) return new ConnectionLost();
  const what = call.answeredNotReady
    ? "the call was sent and answered not ready each time (not run), and no place was ready again: nothing was done"
    : "the call was not sent to any place that could run it, and nothing was done";
  return new NotReady(
    `No tab had the database open and ready within ${Math.round(call.waitedMs / 1000)} s of this call (this tab's worker and the leading tab's, if any, were opening, waiting or gone): ${what}. Send it again once the status is ready.`,
  );
}

/**
 * The attempts waiting for a place (`pick` gives none yet): woken at every change, each given up at its bound
 * (`Bound`), all ended at the endpoint's close with its error (a timer cleared then, not left to fire later).
 */
export class PlaceWaits {
  private readonly waiting = new Set<Waiter>();
  private readonly pauses = new Set<{ cancel: () => void; reject: (error: Error) => void }>();
  private closedWith: Error | undefined;
  constructor(
    private readonly clock: Clock,
    private readonly pick: (way: Way) => Target | undefined,
  ) {}

  next(way: Way, bound?: Bound): Promise<Target> {
    return new Promise<Target>((resolve, reject) => {
      const target = this.pick(way);
      if (target) return resolve(target);
      if (this.closedWith) return reject(this.closedWith);
      const waiter: Waiter = { way, resolve, reject };
      // A call waits no longer than its window (review of 0142 M2 for a resend: a next leader refusing the status, never
      // `ready`; decision 0146 for a first attempt: no tab leads, or none is ready).
      if (bound !== undefined)
        waiter.cancel = this.clock.setTimer(Math.max(0, bound.until - this.clock.now()), () => {
          if (this.waiting.delete(waiter)) reject(bound.giveUp());
        });
      this.waiting.add(waiter);
    });
  }

  /** Resolves after `ms` on the clock; rejects with the close's error if the endpoint closes first (its timer cleared). */
  pause(ms: number): Promise<void> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    return new Promise<void>((resolve, reject) => {
      const pause = { cancel: () => {}, reject };
      this.pauses.add(pause);
      pause.cancel = this.clock.setTimer(ms, () => {
        this.pauses.delete(pause);
        resolve();
      });
    });
  }

  wake(): void {
    for (const waiter of [...this.waiting]) {
      const picked = this.pick(waiter.way);
      if (!picked) continue;
      this.waiting.delete(waiter);
      waiter.cancel?.();
      waiter.resolve(picked);
    }
  }

  /** The endpoint closed: every wait ends now with `error`, and any later one that finds no place. */
  close(error: Error): void {
    this.closedWith = error;
    for (const waiter of this.waiting) {
      waiter.cancel?.();
      waiter.reject(error);
    }
    this.waiting.clear();
    for (const pause of this.pauses) {
      pause.cancel();
      pause.reject(error);
    }
    this.pauses.clear();
  }
}

interface Waiter {
  way: Way;
  resolve: (target: Target) => void;
  reject: (error: Error) => void;
  cancel?: () => void;
}
