/**
 * A tab that follows its object live (docs/decisions/0038), platform-neutral: while another place (the object) holds
 * the lease, the tab's read-only harness applies the object's pushes with `harness.follow`, so its views, waiters and
 * the page move as the work goes on there.
 *
 * - Before it applies anything it asks the object where to start (`follow.from` with its own head) and checks that
 *   its copy is a prefix of the object's history (`continuesHistory`): a fork — or a copy behind what the object's
 *   tail keeps — is never followed; `onForked(theirs)` is told once instead (the rebuild from the object's snapshot
 *   is the app's and the fork's part).
 * - Its log tail holds only what the object may not have: trimmed to the head once the copy is found to continue
 *   the object's history, and after each push applied (decision 0058).
 * - Each push is applied in log order from its head (duplicates skipped, a gap waits), then acknowledged with the
 *   head: the object sends again from there. On every reconnect it asks again (the object may be a new instance),
 *   and when the object says it fell behind what the log keeps (`behind`, decision 0053).
 *
 * ```ts
 * const follower = new Follower({ harness, link, place: "tab", onForked: (theirs) => rebuild(theirs) });
 * await follower.whenHolds(position, ctx); // the copy holds the log up to `position`
 * ```
 */
import { BACKGROUND_CONTEXT, type Context, waitFor } from "../base/context.ts";
import { SerialQueue } from "../base/serial.ts";
import { ConnectionLost, FollowMessageRefused, HarnessClosed, LeaseNotHeld } from "../errors.ts";
import type { Harness } from "../harness.ts";
import type { LogMark } from "../storage/records.ts";
import { Reassembly } from "./chunks.ts";
import { continuesHistory, type LogHistory } from "./fork.ts";
import { applyPushed, type LoggedBatch } from "./handover.ts";
import type { FollowLink } from "./link-client.ts";
import { type FollowStart, followStart, type HandBack, handBack, joinPush, type LeaseHolder, type PushMessage } from "./wire.ts";

export interface FollowerOptions {
  /** The tab's harness, opened read-only (another place holds the lease). */
  harness: Harness;
  link: FollowLink;
  /** This tab's place in the lease. */
  place: string;
  /**
   * Told once when this copy cannot follow the object from its head: its log left the object's history (a fork,
   * `findFork(storage, theirs)` names it), or it is behind what the object's tail keeps. Nothing is applied after.
   */
  onForked?(theirs: LogHistory): void;
  /** Told each time the copy (again) follows the object: its first `follow.from` answered, and after each reconnect. */
  onFollowing?(): void;
  /**
   * Told who holds the lease each time the object says (its `follow.from` answer, its pushes; decision 0057):
   * undefined while the lease is free.
   */
  onHolder?(holder: LeaseHolder | undefined): void;
}

export class Follower {
  readonly #harness: Harness;
  readonly #link: FollowLink;
  readonly #place: string;
  readonly #onForked: ((theirs: LogHistory) => void) | undefined;
  readonly #onFollowing: (() => void) | undefined;
  readonly #onHolder: ((holder: LeaseHolder | undefined) => void) | undefined;
  readonly #joining: Reassembly;
  readonly #line = new SerialQueue();
  readonly #listeners = new Set<(head: LogMark) => void>();
  readonly #stops: Array<() => void> = [];
  /** The pending `whenHolds`' rejections: a stop settles them (decision 0130). */
  readonly #whenStopped = new Set<() => void>();
  /** The copy's head (undefined until read). */
  #head: LogMark | undefined;
  #following = false;
  #forked: LogHistory | undefined;
  #stopped = false;

  constructor(options: FollowerOptions) {
    this.#harness = options.harness;
    this.#link = options.link;
    this.#place = options.place;
    this.#onForked = options.onForked;
    this.#onFollowing = options.onFollowing;
    this.#onHolder = options.onHolder;
    this.#joining = new Reassembly(options.harness.storage.maxRowBytes);
    this.#stops.push(
      options.link.onPush((push) => void this.#line.run(() => this.#apply(push))),
      options.link.onConnected(() => void this.#ask()),
      // Fallen behind what the object's log keeps while connected (decision 0053): asking again says so.
      options.link.onBehind(() => void this.#ask()),
    );
    if (options.link.up) void this.#ask();
  }

  /** The copy's head: the last position it holds (0 before it was read). */
  get head(): number {
    return this.#head?.position ?? 0;
  }

  /** Whether it applies the object's pushes (it asked, and its copy continues the object's history). */
  get following(): boolean {
    return this.#following;
  }

  /** The object's history when this copy could not follow it (`onForked` was told), if so. */
  get forked(): LogHistory | undefined {
    return this.#forked;
  }

  /**
   * Resolves once the copy holds the log up to `position`; rejects `HarnessClosed` when the follower is (or was)
   * stopped first: nothing is applied after, and a wait left pending held a take-back, and the host's reopen queue
   * behind it, for good (decision 0130).
   */
  whenHolds(position: number, context: Context): Promise<void> {
    if (this.head >= position) return Promise.resolve();
    if (this.#stopped) return Promise.reject(new HarnessClosed("The follower"));
    let stop = () => {};
    const held = new Promise<void>((resolve, reject) => {
      const listening = this.#onApplied((head) => {
        if (head.position < position) return;
        stop();
        resolve();
      });
      const ended = () => reject(new HarnessClosed("The follower"));
      this.#whenStopped.add(ended);
      stop = () => {
        listening();
        this.#whenStopped.delete(ended);
      };
    });
    return waitFor(held, context).finally(stop);
  }

  /**
   * Asks the object for the lease back (decision 0038): the object drains, releases at a position P to this tab and
   * goes on pushing what the copy lacks; resolves with the release once the copy holds the log up to P. The caller
   * then closes the read-only harness and opens it again under the lease (it takes the next epoch, the object mints
   * it, and recovers as after a crash — restarts counted — in that epoch's first transaction). Rejects with the
   * object's refusal (`LeaseNotHeld`: it does not hold the lease, or this copy forked), `ConnectionLost`, or
   * `HarnessClosed` when the follower is stopped before the copy holds P (decision 0130). A link silent after the
   * answer while the follower goes on is waited for without a bound (decision 0127: the lease is reserved for this tab).
   */
  async takeBack(context: Context): Promise<HandBack> {
    if (this.#forked) throw new LeaseNotHeld(this.#place, "its copy left the object's history (a fork): rebuild it first");
    const answer = await waitFor(this.#link.call("lease", "handBack", [this.#place, this.head]), context);
    const problem = handBack(answer, "the object's lease.handBack answer");
    if (problem) throw new FollowMessageRefused("shape", problem);
    const released = answer as unknown as HandBack;
    await this.whenHolds(released.position, context);
    return released;
  }

  /**
   * Stops applying and listening (the harness goes on; it is closed or reopened by its owner). Every pending
   * `whenHolds` (a take-back's) rejects `HarnessClosed` (decision 0130).
   */
  stop(): void {
    this.#stopped = true;
    this.#following = false;
    for (const stop of this.#stops.splice(0)) stop();
    for (const ended of [...this.#whenStopped]) ended();
  }

  #onApplied(listener: (head: LogMark) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Asks the object where to start, checks this copy continues its history, then follows. */
  async #ask(): Promise<void> {
    if (this.#stopped || this.#forked) return;
    let start: FollowStart;
    let tail: number | undefined;
    try {
      const mine = await this.#line.run(async () => (this.#head ??= (await this.#harness.storage.load()).log ?? { epoch: 0, position: 0 }));
      // Where this copy's log tail starts: the object sends the epoch stretches from there to the head (decision 0051).
      tail = (await this.#harness.storage.readLog?.(0, 1).catch(() => undefined))?.[0]?.fence.position;
      const answer = await this.#link.call("follow", "from", [this.#place, mine.position, Math.min(tail ?? mine.position, mine.position)]);
      const problem = followStart(answer, "the object's follow.from answer");
      if (problem) throw new TypeError(problem);
      start = answer as unknown as FollowStart;
    } catch (error) {
      // Unanswered within the call's timeout while the link stays up (its frames lost, the object slow): nothing else
      // would ask again until a reconnect, and the copy would stand still. Refused, or the link down: asked again at
      // the next reconnect.
      if (error instanceof ConnectionLost && this.#link.up && !this.#stopped) void this.#ask();
      return;
    }
    if (!this.#stopped) this.#onHolder?.(start.holder);
    await this.#line.run(async () => {
      if (this.#stopped || this.#forked) return;
      const mine = this.#head!;
      const theirs: LogHistory = { head: start.head ?? undefined, epochs: start.epochs };
      const theirHead = start.head?.position ?? 0;
      const behind = mine.position < start.after && mine.position < theirHead;
      if (!continuesHistory(theirs, mine) || behind) {
        this.#following = false;
        this.#forked = theirs;
        this.#onForked?.(theirs);
        return;
      }
      this.#following = true;
      this.#onFollowing?.();
      // Every position up to the head is the object's now: the tail need not wait for a push to be trimmed (decision
      // 0058). Kept, it would be sent as `tail` on every reconnect and, past MAX_SENT_STRETCHES takeovers inside it,
      // its oldest positions would read as a fork that never was.
      if (tail !== undefined && tail <= mine.position) await this.#harness.storage.trimLog?.(mine.position).catch(() => {});
    });
  }

  /** One push of the object's: applied in log order from the head, then the head acknowledged. */
  async #apply(push: PushMessage): Promise<void> {
    if (!this.#following || this.#stopped || !this.#head) return;
    if (push.holder) this.#onHolder?.(push.holder);
    try {
      const batches = joinPush(push, this.#head.position, this.#joining);
      await applyPushed(this.#harness.storage, this.#head.position, batches, async (batch: LoggedBatch) => {
        await this.#harness.follow(batch, BACKGROUND_CONTEXT);
        this.#head = batch.fence;
        for (const listener of this.#listeners) listener(batch.fence);
      });
    } catch {
      // Not applied (parts that do not join, a transaction storage refused): the head says where to send again.
    }
    this.#link.send({ type: "ack", head: this.#head.position, epoch: this.#head.epoch });
  }
}
