/**
 * The tabs' endpoint's subscriptions to a status (follower.ts): its own worker's, and the leader tab's while it follows
 * one (./link.ts). Refused at its ask (that worker's authorize hook refused `onStatus`), `ended` hears the error (the
 * page's status `failed` with it: decision 0117, later). Answered with what passes by itself (the hook threw:
 * `AuthorizeFailed`), it is asked again after the backoff of the endpoint's other unserved subscriptions (./unserved.ts:
 * 500 ms, doubling to 10 s), the status `reconnecting` with that wait and the error meanwhile — before, it stayed
 * `failed` while that worker lived, and a follower `waiting-for-lock` while its leader lived: nothing asked again
 * (decisions 0123 and its review). An ask with no status and no refusal in `STATUS_ASK_MS` on the clock (a subscription
 * taken and never answered with a value counts: decision 0142) is given up and counts as such a throw (`NotReady`); a
 * refusal's backoff goes on growing through throws and starts over only once served (the review of decision 0132, L3
 * and M1).
 */

import { type Clock, systemClock } from "../../base/clock.ts";
import { NotReady } from "../../errors.ts";
import type { HostEndpoint } from "../../host/endpoint.ts";
import { refusalOf } from "../../host/endpoint.ts";
import { shapeOf } from "../../host/error-wire.ts";
import { cancelPending } from "../../host/pending-subscription.ts";
import type { HarnessStatus } from "../../host/protocol.ts";
import { type Backoff, UNSERVED_BACKOFF, UnservedWaits } from "./unserved.ts";

/** An ask's subscription, and its id once answered. */
interface Held {
  subscribed: Promise<number>;
  id?: number;
}

/** The one wait's id in its own `UnservedWaits`. */
const STATUS = 0;

/**
 * How long a status ask may go unanswered (a hook that never settles, a place that hangs) before it counts as an answer
 * that passes by itself — given up, and asked again on the backoff (the review of decision 0132, L3; as long as a follow
 * link's call may take, `CALL_TIMEOUT_MS`). Before, one ask that never settled left no timer: the tab kept its status
 * (`failed`, `waiting-for-lock`) for good.
 */
export const STATUS_ASK_MS = 15_000;

export interface StatusWatchOptions {
  /** An error that says the place is gone (no place to ask again): `ended` hears it. Default: `WorkerGone`. */
  gone?: (error: unknown) => boolean;
  /** Refused, or the place gone: nothing is asked again. Default: `told` hears `failed` with the error. */
  ended?: (error: unknown) => void;
  /** The timers the waits ask again on (the page's by default; a test's manual clock). */
  clock?: Clock;
  /**
   * Refused, asked again after this backoff (the leader's door: decision 0132): `ended` is told the first refusal of a
   * stretch only (the status `failed` once, not again at each refusal), and nothing asks again once the place is gone.
   */
  refused?: Backoff;
}

export interface StatusWatch {
  /**
   * The app's answer may have changed (`HarnessClient.askAgain()`, decision 0132): a subscription refused, or waiting
   * to be asked again, is asked now. Nothing while it is served or asked, or once the place is gone. Resolves once that
   * ask (or the one under way) is answered — served and its status told, refused, failed, or given up at its bound — or
   * the watch is closed; at once when it is served or the place is gone (decision 0138).
   */
  again(): Promise<void>;
  close(): void;
}

/**
 * Watches `endpoint`'s status, telling `told` each one (a wait's `reconnecting` with its last error too) until
 * `close()`.
 */
export function watchStatus(endpoint: HostEndpoint, told: (status: HarnessStatus) => void, options: StatusWatchOptions = {}): StatusWatch {
  const gone = options.gone ?? ((error: unknown) => (error as { name?: unknown } | undefined)?.name === "WorkerGone");
  const ended = options.ended ?? ((error: unknown) => told({ kind: "failed", error: shapeOf(error) }));
  const clock = options.clock ?? systemClock;
  const waits = new UnservedWaits(clock, UNSERVED_BACKOFF);
  const refusals = options.refused && new UnservedWaits(clock, options.refused);
  /** Refused, and not served or answered otherwise since: a refusal again tells nothing (decision 0132). */
  let refused = false;
  let closed = false;
  /** Not served, not asked, not gone: what `again()` asks now. */
  let idle = false;
  /** The ask whose answer counts; an older one's (given up at its bound) is no one's. */
  let round = 0;
  /** The bound of the ask under way, until its first status or its refusal (not its id: decision 0142). */
  let bound: (() => void) | undefined;
  /** The subscription of the ask whose answer counts: the place's to release when it is given up or closed. */
  let current: Held | undefined;
  /** `again()`s waiting for the ask under way to be answered (decision 0138). */
  let asked: (() => void)[] = [];
  const settle = () => {
    const waiting = asked;
    asked = [];
    for (const resolve of waiting) resolve();
  };
  /**
   * Gives `held` up at the place: an answered one unsubscribed, a pending one cancelled (a place that ignores that has it
   * unsubscribed once its late answer comes), a refused one holds nothing. Only one of the two: the cancel of an
   * answered one unsubscribes too, and it went out twice (the review of decision 0137, L2).
   */
  const release = (held: Held | undefined) => {
    if (!held) return;
    if (held.id !== undefined) return void endpoint.unsubscribe(held.id);
    cancelPending(held.subscribed);
    held.subscribed.then((id) => endpoint.unsubscribe(id)).catch(() => {});
  };
  const answered = () => {
    bound?.();
    bound = undefined;
  };
  /** Not served: refused, the place gone, or what passes by itself (a throw, no answer in time). */
  const unserved = (error: unknown) => {
    idle = !gone(error);
    queueMicrotask(settle); // after what it tells below
    if (gone(error) || (refusalOf(error) && !refusals)) return ended(error);
    if (refusalOf(error)) {
      // Asked again, slowly: the app's answer may change (a sign-in); `failed` is told once (decision 0132). The
      // transient wait's attempt is kept: a hook that alternates throws and refusals backs off on both (review, M1).
      refusals!.next(STATUS, ask);
      if (!refused) ended(error);
      refused = true;
      return;
    }
    // The refused backoff goes on growing through a throw, reset only when served (the review of 0132, M1: reset here, a
    // hook alternating throw and `false` was asked every 2.75 s for good); a refusal after it is told again.
    refused = false;
    // What passes by itself is asked again; the status says why it waits (the review of 0123, L3).
    const wait = waits.next(STATUS, ask);
    told({ kind: "reconnecting", attempt: wait.attempt, retryInMs: wait.retryInMs, error: shapeOf(error) });
  };
  const ask = () => {
    idle = false;
    const mine = ++round;
    const counts = () => !closed && round === mine;
    // Set first: a place may answer within `subscribe` itself.
    bound = clock.setTimer(STATUS_ASK_MS, () => {
      bound = undefined;
      if (!counts()) return;
      round++; // its late answer is no one's: not told, and it asks nothing again
      current = undefined;
      release(held);
      unserved(
        new NotReady(
          `The status ask had no answer in ${STATUS_ASK_MS / 1000} s (an authorize hook or the place did not answer); it is asked again.`,
        ),
      );
    });
    const subscribed: Promise<number> = endpoint.subscribe("onStatus", [], (value) => {
      if (!counts()) return;
      answered();
      waits.end(STATUS, true); // served (again): its wait, if any, is over
      refusals?.end(STATUS);
      refused = false;
      told(value as HarnessStatus);
      settle();
    });
    const held: Held = { subscribed };
    current = held;
    // Closed by `told` within `subscribe` (an answer given there; a link closes on `closed`): released now, not held (the
    // review of decision 0137, L1).
    if (closed) return void release(held);
    // The id alone is no answer: the bound holds until the first value (decision 0142; over comlink the id may come
    // before the value, so `again()` cannot settle at the id either: 0138's review, L2). A place that takes the
    // subscription and never sends a status is given up at the bound, as one that never answers.
    subscribed.then(
      (id) => {
        held.id = id;
      },
      (error: unknown) => {
        if (!counts()) return;
        current = undefined;
        answered();
        unserved(error);
      },
    );
  };
  ask();
  return {
    again() {
      // An ask under way is not asked twice: its answer is the one waited for.
      if (!closed && bound) return new Promise<void>((resolve) => asked.push(resolve));
      if (closed || !idle) return Promise.resolve();
      waits.end(STATUS);
      refusals?.end(STATUS);
      const answered = new Promise<void>((resolve) => asked.push(resolve));
      ask();
      return answered;
    },
    /**
     * Stops watching: the subscription served (or on its way) is released at the place, which then sends nothing more
     * and keeps nothing for it (decision 0137; before, a served one stayed at the place until it went).
     */
    close() {
      if (closed) return;
      closed = true;
      answered();
      settle();
      waits.clear();
      refusals?.clear();
      release(current);
      current = undefined;
    },
  };
}
