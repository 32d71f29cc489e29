/**
 * Calls one end of a follow link makes of the other, waiting for their answers (docs/decisions/0031, 0037): the
 * object's calls of its tab (forwarded writes, decision 0034). Each call is pending by its id until the `answer`
 * with that id arrives, and is settled once: an answer, `ConnectionLost` when the place it went to has no open
 * connection, closes, or gives no answer within the timeout. At most `MAX_PENDING` wait at a time (a further call
 * is `ConnectionLost` at once: the caller sends again later, as after any lost connection). A call whose frame is
 * over a follow message's size is `FollowMessageRefused` (size) at once, nothing sent: the other end could only
 * drop it unanswered, and a caller that sends again on `ConnectionLost` would send it for ever.
 *
 * Ids are `<random per instance>:<n>`: the other end remembers answers by id, so an object that started again
 * (an eviction) must never reuse an id of its earlier instance and be given that call's answer.
 */
import type { Clock } from "../base/clock.ts";
import { type IdSource, randomIds } from "../base/ids.ts";
import type { Json } from "../base/json.ts";
import { ConnectionLost, FollowMessageRefused } from "../errors.ts";
import { deserializeError } from "../host/error-wire.ts";
import { utf8Length } from "../limits.ts";
import { MAX_FOLLOW_MESSAGE_BYTES } from "./chunks.ts";
import { type AnswerMessage, encodeFollowMessage } from "./wire.ts";

/** At most this many calls wait for an answer at once. */
export const MAX_PENDING = 256;
/** A call unanswered this long is `ConnectionLost` (the caller may send it again). */
export const CALL_TIMEOUT_MS = 15_000;

interface Pending {
  place: string;
  resolve(value: Json): void;
  reject(error: unknown): void;
  cancelTimeout(): void;
}

export class OutgoingCalls {
  readonly #clock: Clock;
  readonly #pending = new Map<string, Pending>();
  readonly #prefix: string;
  #next = 0;

  /** `newId`: the random part of this instance's ids (decision 0078). */
  constructor(clock: Clock, newId: IdSource = randomIds) {
    this.#clock = clock;
    this.#prefix = newId();
  }

  /** How many calls wait for an answer. */
  get size(): number {
    return this.#pending.size;
  }

  /**
   * Sends a call of `topic`'s `method` to `place` through `send` (undefined: that place has no open connection);
   * resolves with its answer's value, rejects with its error (its class kept) or `ConnectionLost`.
   */
  call(
    place: string,
    send: ((frame: string) => void) | undefined,
    message: { topic: string; method: string; args: Json[] },
    timeoutMs = CALL_TIMEOUT_MS,
  ): Promise<Json> {
    if (!send || this.#pending.size >= MAX_PENDING) return Promise.reject(new ConnectionLost());
    const id = `${this.#prefix}:${++this.#next}`;
    const frame = encodeFollowMessage({ type: "call", id, ...message });
    if (utf8Length(frame) > MAX_FOLLOW_MESSAGE_BYTES)
      return Promise.reject(
        new FollowMessageRefused("size", `a call of ${message.topic}.${message.method} is at most ${MAX_FOLLOW_MESSAGE_BYTES} bytes`),
      );
    return new Promise<Json>((resolve, reject) => {
      const cancelTimeout = this.#clock.setTimer(timeoutMs, () => this.#settle(id, { error: new ConnectionLost() }));
      this.#pending.set(id, { place, resolve, reject, cancelTimeout });
      try {
        send(frame);
      } catch {
        this.#settle(id, { error: new ConnectionLost() });
      }
    });
  }

  /** An answer arrived: settles its call, once (a duplicate, a late or a stranger's answer finds nothing). */
  answered(message: AnswerMessage): void {
    if ("error" in message) this.#settle(message.id, { error: deserializeError(message.error) });
    else this.#settle(message.id, { value: message.value });
  }

  /** `place`'s connection closed: what waits for its answers is `ConnectionLost`. */
  lost(place: string): void {
    for (const [id, pending] of [...this.#pending]) if (pending.place === place) this.#settle(id, { error: new ConnectionLost() });
  }

  #settle(id: string, outcome: { value: Json } | { error: unknown }): void {
    const pending = this.#pending.get(id);
    if (!pending) return;
    this.#pending.delete(id);
    pending.cancelTimeout();
    if ("value" in outcome) pending.resolve(outcome.value);
    else pending.reject(outcome.error);
  }
}
