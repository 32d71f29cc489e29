/**
 * The two-place sweep's places speaking the product's follow link (`TwoPlaceOptions.followLink`, decision 0040):
 * the tab is the real `FollowLink` + `remoteArbiter` + `Mirror` of src/follow/ (coalesced, chunked, validated
 * pushes; the lease asked of the object over the link; effects wait for `Mirror.whenAcknowledged`), the object the
 * real `ObjectEnd` (every frame parsed as hostile, the lease book, the copy, the takeover) — the same classes the
 * browser's worker and the Durable Object run, only the socket is the sweep's lossy `Link` of text frames.
 */
import type { Clock } from "../../base/clock.ts";
import type { Context } from "../../base/context.ts";
import type { Json } from "../../base/json.ts";
import { LEAVING_GRACE_MS, type LeaseBook } from "../../follow/arbiter.ts";
import { FollowLink } from "../../follow/link-client.ts";
import { Mirror, remoteArbiter } from "../../follow/mirror.ts";
import { ObjectEnd } from "../../follow/object-end.ts";
import type { AnswerStore } from "../../follow/object-end-options.ts";
import { encodeFollowMessage } from "../../follow/wire.ts";
import type { Harness, LeaseOptions } from "../../harness.ts";
import type { Storage } from "../../storage/storage.ts";

/** The tab's end: the link to the object, the lease over it, and the mirror once the harness holds the lease. */
export class FollowingTab {
  readonly link: FollowLink;
  readonly lease: LeaseOptions;
  #mirror: Mirror | undefined;
  readonly #clock: Clock;
  readonly #send: (frame: string) => void;
  #said = 0;

  /** `send` puts a frame on the sweep's link (to the object); the socket counts as up from the start. */
  constructor(clock: Clock, send: (frame: string) => void) {
    this.#clock = clock;
    this.#send = send;
    this.link = new FollowLink({ clock, send });
    this.lease = {
      place: "tab",
      arbiter: remoteArbiter(this.link),
      // As src/browser/follow.ts binds it: before an effect the object must hold its commit (decision 0032).
      confirm: (position, context) => (this.#mirror ? this.#mirror.whenAcknowledged(position, context) : Promise.resolve()),
    };
    this.link.connected();
  }

  /** The harness opened and holds the lease: every transaction it stores from now on is pushed live. */
  mirror(harness: Harness): void {
    this.#mirror = new Mirror({ harness, link: this.link, clock: this.#clock });
  }

  /**
   * The page's `lease.leaving(place, epoch, A)` at the mirror's acknowledged head A (decision 0101). With `tellWorker`
   * the worker hears it went out (decision 0113: `TabFollow.leavingSaid` at once) and its harness writes nothing from a
   * grace after: returns that time, on the tab's clock.
   */
  sayLeaving(harness: Harness, tellWorker = false): number | undefined {
    const lease = harness.lease;
    if (!this.#mirror || !lease) return undefined;
    const args = ["tab", lease.epoch, Math.max(0, this.#mirror.acknowledged)];
    const endsBy = this.#clock.now() + LEAVING_GRACE_MS; // read before the send, as the page does
    this.#send(encodeFollowMessage({ type: "call", id: `page-leaving-${++this.#said}`, topic: "lease", method: "leaving", args }));
    return tellWorker && harness.leaving(lease.epoch, endsBy) ? endsBy : undefined;
  }

  /** A frame from the object (the sweep's link delivered it). */
  receive(frame: unknown): void {
    this.link.receive(frame);
  }

  /**
   * Leaves: with `atOnce`, as a closing page's worker does (decision 0035: the harness gives up at its head without
   * draining, the rest and the release go out in the same tick); otherwise drained (`Mirror.handOver`). With
   * `pageLeaving`, the page's own `lease.leaving(place, epoch, A)` goes first (decision 0101: on its own socket in the
   * browser, here one more frame on the link, whose answer the tab does not wait for).
   */
  async leave(harness: Harness, context: Context, atOnce: boolean, pageLeaving = false): Promise<void> {
    const mirror = this.#mirror;
    if (!mirror) return;
    if (pageLeaving) this.sayLeaving(harness);
    if (!atOnce) {
      await mirror.handOver(context);
      return;
    }
    const mark = await harness.handOver(context, { drain: false });
    await mirror.leave(mark, context);
  }
}

/** The object's end on its copy, answering on the sweep's link; its kept lease answers outlive its crashes. */
export async function startObjectEnd(options: {
  storage: Storage;
  book: LeaseBook;
  clock: Clock;
  /** Lease answers by request id, kept across the object's restarts (on a Durable Object, `pi_follow_answers`). */
  answers: Map<string, Json>;
  open(storage: Storage, lease: LeaseOptions): Promise<Harness>;
  reply(frame: string): void;
}): Promise<{ end: ObjectEnd; receive(frame: unknown): Promise<void> }> {
  const answers: AnswerStore = { get: (id) => options.answers.get(id), put: (id, answer) => void options.answers.set(id, answer) };
  const end = await ObjectEnd.start({
    place: "object",
    storage: options.storage,
    book: options.book,
    clock: options.clock,
    answers,
    open: options.open,
  });
  return { end, receive: (frame) => end.receive(frame, options.reply, () => true) };
}
