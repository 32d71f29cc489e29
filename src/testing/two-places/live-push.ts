/**
 * The tab's side of a live mirror, as small as the two-place sweep needs (decision 0032): every stored transaction
 * is pushed as it is stored, everything not acknowledged yet is pushed again every `RESEND_MS`, and each
 * acknowledgement moves an `Acknowledged` — the head a lease's `confirm` waits on before an effect. The product's
 * mirror (`src/follow/mirror.ts`: coalesced, chunked, validated pushes over the object's socket) gives the kernel the
 * same `confirm`; this one speaks the hand-over's messages so the sweep's object (`Arrival`) follows it unchanged.
 */
import type { Clock } from "../../base/clock.ts";
import { Acknowledged } from "../../follow/acknowledged.ts";
import { type HandOverMessage, type LoggedBatch, RESEND_MS } from "../../follow/handover.ts";
import type { Storage } from "../../storage/storage.ts";

export class LivePush {
  readonly acknowledged = new Acknowledged();
  readonly #place: string;
  readonly #storage: Storage;
  readonly #clock: Clock;
  readonly #send: (message: HandOverMessage) => void;
  #cancel: (() => void) | undefined;
  #stopped = false;

  constructor(options: { place: string; storage: Storage; clock: Clock; send(message: HandOverMessage): void }) {
    this.#place = options.place;
    this.#storage = options.storage;
    this.#clock = options.clock;
    this.#send = options.send;
    this.#arm();
  }

  /** A transaction was stored here (`harness.onLog`): push it now. */
  logged(batch: LoggedBatch): void {
    if (!this.#stopped) this.#send({ type: "push", from: this.#place, batches: [batch] });
  }

  receive(message: HandOverMessage): void {
    if (message.type !== "ack") return;
    this.acknowledged.moved(message.head);
    void this.#storage.trimLog?.(message.head);
  }

  /** No more pushes (the place hands over, or stopped). */
  stop(): void {
    this.#stopped = true;
    this.#cancel?.();
  }

  #arm(): void {
    this.#cancel = this.#clock.setTimer(RESEND_MS, () => {
      if (this.#stopped) return;
      void this.#resend().finally(() => this.#arm());
    });
  }

  /** Pushes again what the other side did not acknowledge (lost or dropped pushes), from the durable log. */
  async #resend(): Promise<void> {
    if (!this.#storage.readLog) return;
    const batches = await this.#storage.readLog(this.acknowledged.head, 64);
    if (batches.length > 0 && !this.#stopped) this.#send({ type: "push", from: this.#place, batches });
  }
}
