/**
 * What the page's socket (./socket.ts) tells `onState`: each change once, and an `unserved` stretch's attempt never
 * going down (decision 0123).
 */

import type { ErrorShape } from "../host/protocol.ts";

/** The connection's state, as `SocketEndpointOptions.onState` hears it. */
export type SocketState =
  /** A connection opened; also: the open connection serves every subscription again (after `unserved`). */
  | { state: "open" }
  | { state: "reconnecting"; attempt: number; retryInMs: number }
  /**
   * The open connection could not serve a subscription now: told once per `attempt`, the highest any subscription has
   * waited at since the connection last served them all (a lower one told later is not: the attempt never goes down
   * within one stretch, decision 0123); `retryInMs` is the wait of the first to reach it, `error` the host's answer it
   * waits after (its hook threw: `AuthorizeFailed`; decision 0123's review).
   */
  | { state: "unserved"; attempt: number; retryInMs: number; error?: ErrorShape };

/** `onState`, told each change once. */
export class StateTold {
  #told: SocketState | undefined;
  /** The last wait ended (refused) and its `open` is not told yet: the next wait begins a stretch of its own. */
  #ended = false;
  readonly #onState: ((state: SocketState) => void) | undefined;

  constructor(onState: ((state: SocketState) => void) | undefined) {
    this.#onState = onState;
  }

  /** The last state told. */
  get last(): SocketState | undefined {
    return this.#told;
  }

  /** Tells `state` unless it is the one told last (two waits ending told the same `open` twice; decision 0117, later). */
  tell(state: SocketState): void {
    if (JSON.stringify(state) === JSON.stringify(this.#told)) return;
    this.#ended = false;
    this.#told = state;
    this.#onState?.(state);
  }

  /**
   * A wait's backoff began, `highest` the highest attempt any wait is at now: `unserved` is told once per attempt — another
   * wait reaching it later (its jittered backoff another `retryInMs`) is not told again (0117, later), and neither is a
   * lower one within the same stretch (the highest waiter served while a lower one fails again: before, 3 then 2; 0123).
   */
  unserved(highest: { attempt: number; retryInMs: number; error?: ErrorShape }): void {
    const told = this.#told;
    const ended = this.#ended;
    // Cleared by any wait reported, told or not: one equal to the last told (deduplicated) begins the new stretch too
    // (the review of decision 0137, L4; before, a lower attempt later in that stretch was still told).
    this.#ended = false;
    if (told?.state === "unserved" && told.attempt >= highest.attempt && !ended) return;
    const { attempt, retryInMs, error } = highest;
    this.tell({ state: "unserved", attempt, retryInMs, ...(error && { error }) });
  }

  /**
   * The last wait ended with a refusal, and `open` is told a task later (after the refused one's owner heard it; socket.ts):
   * the stretch is over. A wait that begins before that `open` is a new stretch, told at its own attempt — before, it
   * merged into the ended one, which went on showing that wait's higher attempt and retry (decision 0123's review, L5).
   */
  ended(): void {
    if (this.#told?.state === "unserved") this.#ended = true;
  }
}
