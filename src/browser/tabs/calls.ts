/**
 * A call through the tabs' endpoint (./follower.ts): sent where the database is — this tab's own worker (`OWN`) or the
 * leader tab's over a link — and sent again, where that is safe, when the place went with it in flight.
 */
import type { Clock } from "../../base/clock.ts";
import { ConnectionLost, NotReady } from "../../errors.ts";
import type { HostEndpoint } from "../../host/endpoint.ts";
import { jitteredBackoff } from "../backoff.ts";
import { NOT_READY_RESEND_MS, resentOnNotReady } from "../not-ready-resend.ts";
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
   * Where the attempt goes now; waits until there is such a place, until `until` at most: then a resend rejects
   * `ConnectionLost` (it may have run), a call never sent `NotReady` (`notPlaced`).
   */
  next(way: Way, until?: number): Promise<Target>;
  /** Resolves after `ms` on the clock; rejects at the endpoint's close. */
  pause(ms: number): Promise<void>;
  endpointOf(target: Target): HostEndpoint;
  /** Whether this tab's worker failed the call because the database left it (taken over): sent again, where it went. */
  ownLost(error: unknown): Promise<boolean>;
  lose(link: Link): void;
  /**
   * Whether this tab's worker answered that it waits for the database another tab has (the host's own "not open",
   * decision 0142): the call, applied nowhere, goes there as the same attempt.
   */
  waitsElsewhere(error: unknown): boolean;
}

export async function sendCall(route: CallRoute, method: string, args: unknown[]): Promise<unknown> {
  let sent = args;
  const started = route.clock.now();
  let forward = false;
  /** When a place first answered this call `NotReady`, and how many times it was sent again since (decision 0146). */
  let notReady: { since: number; resends: number } | undefined;
  for (let fresh = true; ; ) {
    const way: Way = forward ? "forward" : fresh ? "call" : "resend";
    // A call waits for a place within the window too, first attempt or not (before, a first attempt waited for good
    // while no tab had the database ready: decision 0146); one sent again after `NotReady` within that window.
    const until = Math.max(started + RESEND_WINDOW_MS, notReady ? notReady.since + NOT_READY_RESEND_MS : 0);
    const target = await route.next(way, until);
    // Past the window the harness may have let the call's hand-over key expire (decision 0022).
    if (!fresh && route.clock.now() - started > RESEND_WINDOW_MS) throw new ConnectionLost();
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
        continue;
      }
      // The place answered NotReady: its worker's follow link gave up on the object's switch (decisions 0135, 0139).
      // A read, or a write the object forwards under the key it carries from the first send, goes again after a backoff
      // for `NOT_READY_RESEND_MS`, as a page on the object does (./not-ready-resend.ts); a stop or a call never sent
      // again (`createTask`, `claimPageCall`, `never`) is the caller's `NotReady`: nothing was applied.
      if (error instanceof NotReady && resentOnNotReady(method, sent)) {
        const now = route.clock.now();
        notReady ??= { since: now, resends: 0 };
        const left = notReady.since + NOT_READY_RESEND_MS - now;
        if (left <= 0) throw error;
        await route.pause(Math.min(left, jitteredBackoff(notReady.resends++, 250, 4_000, Math.random)));
        continue;
      }
      if (target === OWN ? !(await route.ownLost(error)) : !isLoss(error)) throw error;
      if (target !== OWN) route.lose(target);
      if (!retried(method, sent)) throw new ConnectionLost();
      fresh = false;
    }
  }
}

/**
 * Why a call that waited for a place (`RESEND_WINDOW_MS`) and found none ends: `NotReady` (retryable) when it was never
 * sent anywhere that could apply it — a first attempt, or one this tab's worker answered that it waits for the database
 * elsewhere (`forward`) — and `ConnectionLost` ("may or may not have run") for a resend.
 */
export function notPlaced(way: Way): Error {
  if (way !== "call" && way !== "forward") return new ConnectionLost();
  return new NotReady(
    `No tab had the database open and ready within ${RESEND_WINDOW_MS / 1000} s of this call (this tab's worker and the leading tab's, if any, were opening, waiting or gone): the call was not sent and nothing was done. Send it again once the status is ready.`,
  );
}

/**
 * The attempts waiting for a place (`pick` gives none yet): woken at every change, each given up at its bound
 * (`notPlaced`), all ended at the endpoint's close with its error (a timer cleared then, not left to fire later).
 */
export class PlaceWaits {
  private readonly waiting = new Set<Waiter>();
  private readonly pauses = new Set<{ cancel: () => void; reject: (error: Error) => void }>();
  private closedWith: Error | undefined;
  constructor(
    private readonly clock: Clock,
    private readonly pick: (way: Way) => Target | undefined,
  ) {}

  next(way: Way, until?: number): Promise<Target> {
    return new Promise<Target>((resolve, reject) => {
      const target = this.pick(way);
      if (target) return resolve(target);
      if (this.closedWith) return reject(this.closedWith);
      const waiter: Waiter = { way, resolve, reject };
      // A call waits no longer than its window (review of 0142 M2 for a resend: a next leader refusing the status, never
      // `ready`; decision 0146 for a first attempt: no tab leads, or none is ready).
      if (until !== undefined)
        waiter.cancel = this.clock.setTimer(Math.max(0, until - this.clock.now()), () => {
          if (this.waiting.delete(waiter)) reject(notPlaced(way));
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
