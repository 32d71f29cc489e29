/**
 * The subscriptions of a copy served to other devices (copy-service.ts, decision 0034), kept so that they move to the
 * holding host when this place takes the lease (`moveTo`). A watch the copy has not answered yet (decision 0103) waits
 * here and is asked of the holding host too (decision 0107). A subscription its host ends by itself — one the holding
 * host refuses at the move, or a watch a host moved to a harness that lacks its conversation — is held no more and
 * its owner's `lost` is told once (decision 0117; before, it was dropped, and a page on an object's socket, which
 * never asks again, heard nothing for good).
 */
import { errorMessage } from "../base/error-message.ts";
import { safely } from "../base/safely.ts";
import { DurableError, NotFound } from "../errors.ts";
import type { ServedHost } from "../host/host.ts";
import { cancelPending, type PendingSubscription, pendingSubscription } from "../host/pending-subscription.ts";
import type { MethodName, SubscriptionLost, Unsubscribe } from "../host/protocol.ts";

/** A subscription, so it can move to the holding host. */
interface Held {
  method: MethodName;
  args: unknown[];
  listener: (value: never) => void;
  /** Given to the host that serves it: it ended there by itself. Tells its owner's `lost` once. */
  ended: SubscriptionLost;
  unsubscribe: Unsubscribe;
}

type AnyMethod = (...args: unknown[]) => unknown;
type Started = Unsubscribe | Promise<Unsubscribe>;

export class CopySubscriptions {
  readonly #delegate: (method: MethodName, args: unknown[]) => unknown;
  readonly #held = new Set<Held>();
  /** Subscriptions the copy has not answered yet: `move` starts each again on the holding host. */
  readonly #waiting = new Set<{ move(host: ServedHost): void; end(error: unknown): void }>();

  /** `delegate` calls a method on the host that serves now (the copy's, then the holding one's). */
  constructor(delegate: (method: MethodName, args: unknown[]) => unknown) {
    this.#delegate = delegate;
  }

  /** Subscribes through `delegate`: `all` is the protocol's arguments, the listener, then the owner's optional `lost`. */
  subscribe(method: MethodName, all: unknown[]): Started {
    // The listener is the first function (no protocol argument is one).
    const at = all.findIndex((arg) => typeof arg === "function");
    const args = all.slice(0, at);
    const listener = all[at] as (value: never) => void;
    const lost = typeof all[at + 1] === "function" ? (all[at + 1] as SubscriptionLost) : undefined;
    let held: Held | undefined;
    /** Ended by its host before it was held here: `hold` ends it at once. */
    let endedEarly: Error | undefined;
    const ended: SubscriptionLost = (error) => {
      if (!held) endedEarly ??= error;
      else if (this.#held.delete(held)) safely(() => lost?.(error));
    };
    const hold = (unsubscribe: Unsubscribe): Unsubscribe => {
      held = { method, args, listener, ended, unsubscribe };
      this.#held.add(held);
      if (endedEarly) ended(endedEarly);
      return () => {
        if (held && this.#held.delete(held)) held.unsubscribe();
      };
    };
    const started = this.#delegate(method, [...args, listener, ended]) as Started;
    if (!(started instanceof Promise)) return hold(started);
    // A watch that waits for its conversation (decision 0103) is held once it started; until then it is waiting,
    // so that the takeover moves it too and its caller may give it up (decision 0107).
    return this.#waitingSubscription(method, [...args, listener, ended], started, hold);
  }

  /** Each held subscription's listener of `method` (the copy's status subscribers, told a new holder). */
  listenersOf(method: MethodName): Array<(value: never) => void> {
    return [...this.#held].filter((held) => held.method === method).map((held) => held.listener);
  }

  /** Moves every subscription to `host`, which holds the lease now; one it refuses has ended, and its owner is told. */
  moveTo(host: ServedHost): void {
    for (const held of this.#held) {
      held.unsubscribe();
      const refused = (error: unknown) => held.ended(error instanceof Error ? error : new DurableError(errorMessage(error)));
      try {
        const moved = (host.service[held.method] as AnyMethod)(...held.args, held.listener, held.ended) as Started;
        if (moved instanceof Promise) {
          moved.catch(refused); // given up by its owner first: no longer held, nobody told
          held.unsubscribe = () => {
            cancelPending(moved);
            void moved.then(
              (stop) => stop(),
              () => {},
            );
          };
        } else held.unsubscribe = moved;
      } catch (error) {
        refused(error); // the holder refuses it (what it watched is gone)
      }
    }
    // A watch still waiting on the copy for its conversation is asked of the holding host (decision 0107): before,
    // it waited on the copy's harness, closed after the move, and was never answered.
    for (const entry of [...this.#waiting]) entry.move(host);
  }

  /** Ends every subscription (the service closes): waiting ones are refused with `error`. */
  end(error: unknown): void {
    for (const entry of [...this.#waiting]) entry.end(error);
    for (const held of this.#held) held.unsubscribe();
    this.#held.clear();
  }

  #waitingSubscription(
    method: MethodName,
    /** The protocol's arguments, the listener and `ended`. */
    args: unknown[],
    first: Promise<Unsubscribe>,
    hold: (unsubscribe: Unsubscribe) => Unsubscribe,
  ): PendingSubscription {
    let pending: Promise<Unsubscribe> = first;
    let settle!: { resolve(unsubscribe: Unsubscribe): void; reject(error: unknown): void };
    const answer = new Promise<Unsubscribe>((resolve, reject) => (settle = { resolve, reject }));
    const entry = {
      move(host: ServedHost) {
        cancelPending(pending); // the copy's wait ends with its harness; the holding host answers it now
        try {
          follow((host.service[method] as AnyMethod)(...args) as Started);
        } catch (error) {
          done(() => settle.reject(error));
        }
      },
      end(error: unknown) {
        cancelPending(pending);
        done(() => settle.reject(error));
      },
    };
    const done = (then: () => void) => {
      if (this.#waiting.delete(entry)) then();
    };
    const follow = (started: Started) => {
      if (!(started instanceof Promise)) return done(() => settle.resolve(hold(started)));
      pending = started;
      started.then(
        (unsubscribe) => (pending === started ? done(() => settle.resolve(hold(unsubscribe))) : unsubscribe()),
        (error: unknown) => pending === started && done(() => settle.reject(error)),
      );
    };
    this.#waiting.add(entry);
    follow(first);
    return pendingSubscription(answer, () => entry.end(new NotFound("The watch was given up before it started.")));
  }
}
