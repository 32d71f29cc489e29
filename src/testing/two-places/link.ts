/**
 * A message link between named places, as unreliable as a network: a message sent is only in flight until the
 * test decides, one step at a time, to deliver it (in any order), drop it or deliver a duplicate of it. Messages
 * are copied when sent (nothing is shared between places) and go to whichever handler the place has when they
 * are delivered (a restarted place gets what was sent to its dead incarnation).
 */
export type LinkAction = "deliver" | "drop" | "duplicate";

export interface InFlight<M> {
  readonly to: string;
  readonly message: M;
}

export class Link<M> {
  readonly #inFlight: Array<InFlight<M>> = [];
  readonly #handlers = new Map<string, (message: M) => Promise<void> | void>();
  /** Every delivery, in order, for messages: `to: type`. */
  readonly delivered: string[] = [];
  /** What the handlers threw. */
  readonly errors: unknown[] = [];
  /** Settles when the handler of the last delivered message returned. */
  handled: Promise<void> = Promise.resolve();

  /** Sets (or replaces, after a restart) the handler of `place`; `undefined` while the place is down. */
  attach(place: string, handler: ((message: M) => Promise<void> | void) | undefined): void {
    if (handler) this.#handlers.set(place, handler);
    else this.#handlers.delete(place);
  }

  send(to: string, message: M): void {
    this.#inFlight.push({ to, message: JSON.parse(JSON.stringify(message)) as M });
  }

  /** Drops every in-flight message `which` picks (what a crashed sender had not got out). */
  drop(which: (item: InFlight<M>) => boolean): void {
    for (let index = this.#inFlight.length - 1; index >= 0; index--) if (which(this.#inFlight[index]!)) this.#inFlight.splice(index, 1);
  }

  get inFlight(): readonly InFlight<M>[] {
    return this.#inFlight;
  }

  /**
   * Acts on the in-flight message at `pick` (taken modulo how many there are): delivers it, drops it, or delivers
   * it and keeps a copy in flight. A message for a place that is down is lost. Returns false when nothing is in flight.
   */
  step(pick: number, action: LinkAction): boolean {
    if (this.#inFlight.length === 0) return false;
    const index = pick % this.#inFlight.length;
    const [item] = action === "duplicate" ? [this.#inFlight[index]!] : this.#inFlight.splice(index, 1);
    if (action === "drop") return true;
    const handler = this.#handlers.get(item!.to);
    if (!handler) return true;
    this.delivered.push(`${item!.to}: ${(item!.message as { type?: string }).type ?? "?"}`);
    // Not awaited: a place that dies while it handles a message never finishes handling it.
    this.handled = Promise.resolve()
      .then(() => handler(JSON.parse(JSON.stringify(item!.message)) as M))
      .catch((error: unknown) => void this.errors.push(error));
    return true;
  }
}
