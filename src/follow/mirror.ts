/**
 * The tab's side of following (docs/decisions/0031), platform-neutral: the lease asked of the object over the
 * link (`remoteArbiter`), and a mirror that pushes every stored transaction of the harness live.
 *
 * - Coalesced: one push round is in flight at a time; whatever is stored meanwhile goes in the next one.
 * - Resent after a lost link (and after `resendMs` without an answer) from the durable log tail, which keeps
 *   every transaction until the object acknowledged it; trimmed on acknowledgement.
 * - The hand-over on top: `handOver()` drains the harness, pushes only the rest, releases at its head and
 *   resolves once the object took the lease.
 *
 * ```ts
 * const link = new FollowLink({ clock, send: (frame) => socket.send(frame) }); // link-client.ts: wire it to the socket
 * const harness = await Harness.open(storage, { registry, lease: { place: "tab", arbiter: remoteArbiter(link) } }, ctx);
 * const mirror = new Mirror({ harness, link, clock }); // pushes from now on
 * await mirror.whenAcknowledged(harness.lease!.position); // the object holds everything up to here
 * addEventListener("pagehide", () => void mirror.handOver(ctx)); // the object carries on
 * ```
 */
import type { Clock } from "../base/clock.ts";
import { type Context, waitFor } from "../base/context.ts";
import type { Json } from "../base/json.ts";
import { DurableError, FollowMessageRefused, HarnessClosed } from "../errors.ts";
import type { Harness } from "../harness.ts";
import { deserializeError } from "../host/error-wire.ts";
import { isRetryable } from "../retryable.ts";
import type { LogMark } from "../storage/records.ts";
import { DEFAULT_LEASE_TTL_MS, type LeaseArbiter, type LeaseGrant } from "./arbiter.ts";
import { type LoggedText, textFrames } from "./chunks.ts";
import type { LogHistory } from "./fork.ts";
import type { FollowLink, PushReply } from "./link-client.ts";
import { loggedText, Unacked } from "./unacked.ts";

/** Whether a refused push may be stored when sent again unchanged (decision 0039). */
function passing(error: Error): boolean {
  return !(error instanceof DurableError) || isRetryable(error);
}

/** The object's `LeaseBook`, asked over the link (topic `lease`): `HarnessOptions.lease.arbiter` of a tab. */
export function remoteArbiter(link: FollowLink): LeaseArbiter {
  return {
    acquire: async (place, head, epoch) =>
      grantOf(await link.call("lease", "acquire", epoch === undefined ? [place, head] : [place, head, epoch])),
    renew: async (place, epoch) => grantOf(await link.call("lease", "renew", [place, epoch])),
    release: async (place, epoch, position, heir) => {
      await link.call("lease", "release", heir === undefined ? [place, epoch, position] : [place, epoch, position, heir]);
    },
  };
}

/**
 * A grant as it crossed the wire, checked: JSON has no Infinity, so a pinned lease's `ttlMs` arrives as null and
 * means pinned again here (read as a number it was 0: the tab's pinned lease expired the moment it was granted).
 */
function grantOf(value: Json): LeaseGrant {
  const grant = value as { epoch?: unknown; ttlMs?: unknown } | null;
  const epoch = grant?.epoch;
  const ttlMs = grant?.ttlMs === null ? Number.POSITIVE_INFINITY : grant?.ttlMs;
  if (typeof epoch !== "number" || !Number.isSafeInteger(epoch) || epoch < 1 || typeof ttlMs !== "number" || !(ttlMs > 0))
    throw new FollowMessageRefused(
      "shape",
      `a lease grant is { epoch: a positive integer, ttlMs: a positive number or null }, not ${JSON.stringify(value)}`,
    );
  return { epoch, ttlMs };
}

export interface MirrorOptions {
  /** A harness that holds its lease (`lease` option): what it stores is pushed. */
  harness: Harness;
  link: FollowLink;
  clock: Clock;
  /** A push round or a release unanswered this long is sent again (from the durable tail). Default 2,000 ms. */
  resendMs?: number;
  /** Transactions read from the durable tail for one round. Default 256. */
  roundLimit?: number;
  /**
   * Told once when the object refused a push for good (a newer epoch holds the lease, this place may not push, the
   * transaction is past a limit: one of the library's errors that is not retryable): the mirror stops pushing. A
   * refusal that may pass (a retryable error, one that is not the library's: the object's storage failing, or for
   * `closedPassesMs` the object's `HarnessClosed`: it is between harnesses) does not stop it: the round goes again after
   * `resendMs`.
   * `theirs` is the object's log as it told it (head and epochs): `findFork(storage, theirs)` names what of this
   * place's log the object lacks (decision 0032).
   */
  onRefused?(error: Error, theirs: LogHistory): void;
  /**
   * A remote `HarnessClosed` (an object deployed before decision 0130 answers its switch between harnesses so) passes
   * this long from the first one heard with no acknowledgement since, on this clock; then it is final (the object's
   * copy closed for good: a wait ends with it, review of 0130, M1). Default one lease's time (`DEFAULT_LEASE_TTL_MS`).
   */
  closedPassesMs?: number;
}

/** What the mirror sent, for measurements (replicated bytes per step). */
export interface MirrorStats {
  rounds: number;
  frames: number;
  /** UTF-8 bytes of every push frame sent. */
  bytes: number;
  /**
   * Refusals taken as passing, each a round sent again (the object's `NotReady` in its switch, its storage failing, for
   * `closedPassesMs` a remote `HarnessClosed`): a trace of the switch (review of 0130, L2; decision 0135).
   */
  retriedRefusals: number;
}

export class Mirror {
  readonly #harness: Harness;
  readonly #link: FollowLink;
  readonly #clock: Clock;
  readonly #resendMs: number;
  readonly #roundLimit: number;
  readonly #closedPassesMs: number;
  /** When the first remote `HarnessClosed` since the last acknowledgement was heard (this clock). */
  #closedSince: number | undefined;
  readonly #onRefused: ((error: Error, theirs: LogHistory) => void) | undefined;
  readonly #place: string;
  readonly #epoch: number;
  /**
   * Stored since the last acknowledgement, in log order (heard from `onLog`; the durable tail holds them too): their
   * marks and log texts as the storage gave them, pushed as they are (decisions 0093, 0122).
   */
  readonly #unacked = new Unacked();
  /** The last position stored here. */
  #stored: number;
  /** The object's head as last acknowledged (-1: not heard yet). */
  #acked = -1;
  /** The last position of the round in flight. */
  #inFlight: number | undefined;
  #refused: Error | undefined;
  #leaving: LogMark | undefined;
  #taken: { resolve(): void; reject(error: Error): void } | undefined;
  #cancelResend: (() => void) | undefined;
  readonly #ackListeners = new Set<(position: number) => void>();
  readonly #stops: Array<() => void> = [];
  readonly stats: MirrorStats = { rounds: 0, frames: 0, bytes: 0, retriedRefusals: 0 };

  constructor(options: MirrorOptions) {
    const lease = options.harness.lease;
    if (!lease) throw new TypeError("Mirror needs a harness that holds a lease: open it with the lease option (remoteArbiter(link)).");
    this.#harness = options.harness;
    this.#link = options.link;
    this.#clock = options.clock;
    this.#resendMs = options.resendMs ?? 2_000;
    this.#roundLimit = options.roundLimit ?? 256;
    this.#closedPassesMs = options.closedPassesMs ?? DEFAULT_LEASE_TTL_MS;
    this.#onRefused = options.onRefused;
    this.#place = lease.place;
    this.#epoch = lease.epoch;
    this.#stored = lease.position;
    this.#stops.push(
      options.harness.onLog((batch, text) => {
        this.#stored = batch.fence.position;
        this.#unacked.add(batch, text);
        // A round in flight takes this one in the next (what a step sees while its job runs: nothing more to do).
        if (this.#inFlight === undefined) this.#pump();
      }),
      options.link.onReply((reply) => void this.#reply(reply)),
      options.link.onConnected(() => {
        this.#inFlight = undefined; // what was in flight may be lost with the old connection
        this.#pump();
      }),
    );
    this.#pump();
  }

  /** The object's copy holds the log up to this position (-1 before it first answered). */
  get acknowledged(): number {
    return this.#acked;
  }

  /** Why the mirror stopped pushing (the object refused a push), if it did. */
  get refused(): Error | undefined {
    return this.#refused;
  }

  /** Hears each acknowledgement that moves the object's head. Returns the function that stops listening. */
  onAcknowledged(listener: (position: number) => void): () => void {
    this.#ackListeners.add(listener);
    return () => this.#ackListeners.delete(listener);
  }

  /** Resolves once the object acknowledged `position` (before an effect: a takeover then keeps that step). */
  whenAcknowledged(position: number, context: Context): Promise<void> {
    if (this.#acked >= position) return Promise.resolve();
    if (this.#refused) return Promise.reject(this.#refused);
    return waitFor(
      new Promise<void>((resolve, reject) => {
        const stop = this.onAcknowledged((head) => {
          if (head < position && !this.#refused) return;
          stop();
          if (head >= position) resolve();
          else reject(this.#refused);
        });
      }),
      context,
    );
  }

  /**
   * Hands the lease to the object: the harness stops (nothing more is written), the rest of the log is pushed,
   * the lease released at the harness's head. Resolves with that position once the object took the lease.
   */
  async handOver(context: Context): Promise<LogMark> {
    const mark = await this.#harness.handOver(context);
    await this.leave(mark, context, { eager: false });
    return mark;
  }

  /**
   * Releases the lease at `mark` once the harness stopped writing there (its `handOver`, drained or not): with
   * `eager` (the default) the rest of the log the mirror holds in memory and the `release` are sent in this very
   * tick, without waiting for an acknowledgement — all a leaving page may still send (decision 0035); the object
   * applies them in order and covers the release. Then, or without `eager`, rounds and the release go on until the
   * object says it took the lease; resolves then. Rejects with the object's refusal when it refused a push for good (`StaleEpoch`: it took the lease over first, the release lost or late — the rest it never acknowledged is this place's fork, when there is any; or any other refusal that is not retryable).
   */
  async leave(mark: LogMark, context: Context, options: { eager?: boolean } = {}): Promise<void> {
    this.#leaving = mark;
    // Refused for good (a newer epoch holds the lease: the object took it over while the release was lost) settles it
    // too: no `taken` comes after a refusal, and a leave that waited for one held the host's reopen for ever.
    const taken = new Promise<void>((resolve, reject) => (this.#taken = { resolve, reject }));
    if (this.#refused) this.#taken?.reject(this.#refused);
    if ((options.eager ?? true) && !this.#sendRest(mark, this.#unacked.texts(Math.max(this.#acked, 0), mark.position))) {
      // The buffer does not reach the mark (the mirror began after transactions it never saw, or the last one's
      // log is not delivered yet): the durable tail holds them. Read in this task's microtasks, not in a next round
      // that a closing page never runs.
      const tail = this.#harness.storage.readLog?.(Math.max(0, this.#acked), this.#roundLimit);
      void tail
        ?.then(
          (batches) =>
            this.#leaving === mark &&
            this.#sendRest(
              mark,
              batches.map((batch) => loggedText(batch)),
              true,
            ),
        )
        .catch(() => {});
    }
    this.#pump();
    try {
      await waitFor(taken, context);
    } finally {
      this.stop();
    }
  }

  /**
   * Sends, at once, what the object lacks up to `mark` and the release there, when `logged` holds all of it from the
   * acknowledged head on; true when sent. The durable tail (`tail`) holds everything after what the object
   * acknowledged (it is trimmed only on acknowledgements), so before this mirror heard the object's head it starts
   * wherever the tail does; the object skips what it already holds.
   */
  #sendRest(mark: LogMark, logged: readonly LoggedText[], tail = false): boolean {
    if (!this.#link.up || this.#refused) return false;
    const from = Math.max(this.#acked, 0);
    const rest = logged.filter((one) => one.position > from && one.position <= mark.position);
    const first = tail && this.#acked < 0 && rest.length > 0 ? rest[0]!.position : from + 1;
    const reaches = rest.length === 0 ? from >= mark.position : rest[0]!.position === first && rest.at(-1)!.position === mark.position;
    if (!reaches) return false;
    for (const { frame, bytes } of textFrames(this.#place, this.#epoch, rest)) this.#count(this.#link.sendEncoded(frame, bytes));
    this.#link.send({ type: "release", from: this.#place, epoch: mark.epoch, position: mark.position });
    return true;
  }

  /** Stops pushing and listening (the harness goes on). */
  stop(): void {
    this.#cancelResend?.();
    for (const stop of this.#stops.splice(0)) stop();
  }

  #pump(): void {
    if (this.#refused || this.#inFlight !== undefined || !this.#link.up) return;
    if (this.#leaving && this.#acked >= this.#leaving.position) {
      const { epoch, position } = this.#leaving;
      this.#link.send({ type: "release", from: this.#place, epoch, position });
      this.#armResend();
      return;
    }
    if (this.#acked >= this.#stored) return;
    void this.#round();
  }

  /** One push round: what the object lacks, from the buffer when it holds it, else from the durable tail. */
  async #round(): Promise<void> {
    this.#inFlight = this.#stored;
    let logged = this.#acked < 0 ? [] : this.#unacked.texts(this.#acked);
    if (logged[0]?.position !== this.#acked + 1) {
      const storage = this.#harness.storage;
      // A tail that cannot be read now (the storage busy or failing) is read again by the resend: a round left in
      // flight with no timer would push nothing more until the link reconnected (review of 0122).
      const tail = storage.readLog ? await storage.readLog(Math.max(0, this.#acked), this.#roundLimit).catch(() => undefined) : [];
      if (tail === undefined) return this.#armResend();
      logged = tail.map((batch) => loggedText(batch));
    }
    this.#armResend();
    if (logged.length === 0 && this.#acked >= 0) return; // nothing readable yet: the resend looks again
    this.#inFlight = logged.at(-1)?.position ?? 0;
    this.stats.rounds++;
    // Before the object first answered and with nothing in the tail, an empty push asks for its head.
    if (logged.length === 0) this.#count(this.#link.send({ type: "push", from: this.#place, epoch: this.#epoch, batches: [], parts: [] }));
    // Each frame made of the transactions' log texts (decision 0093); the link went down: the next connection sends the round again.
    else
      for (const { frame, bytes } of textFrames(this.#place, this.#epoch, logged))
        if (!this.#count(this.#link.sendEncoded(frame, bytes))) break;
  }

  async #reply(reply: PushReply): Promise<void> {
    if (reply.type === "taken") {
      if (this.#leaving) this.#taken?.resolve();
      return;
    }
    if (reply.type === "refused") {
      if (this.#refused) return;
      const error = deserializeError(reply.error);
      if (passing(error) || this.#closedPasses(error)) {
        // The object could not store it this time (its switch, its storage busy or failing): the round goes again after resendMs.
        this.stats.retriedRefusals++;
        this.#armResend();
        return;
      }
      this.#refused = error;
      this.#cancelResend?.();
      const epochs = reply.epochs ?? [];
      const headEpoch = epochs.filter((stretch) => stretch.start <= reply.head).at(-1)?.epoch;
      const history: LogHistory = {
        head: reply.head > 0 && headEpoch !== undefined ? { epoch: headEpoch, position: reply.head } : undefined,
        epochs,
      };
      this.#onRefused?.(this.#refused, history);
      for (const listener of this.#ackListeners) listener(this.#acked);
      if (this.#leaving) this.#taken?.reject(this.#refused);
      return;
    }
    const moved = reply.head > this.#acked;
    if (moved) {
      this.#closedSince = undefined;
      this.#acked = reply.head;
      this.#unacked.acknowledge(reply.head);
      for (const listener of this.#ackListeners) listener(reply.head);
      // Acknowledged: the tail need not keep it (a crash now pushes only the rest).
      await this.#harness.storage.trimLog?.(Math.min(reply.head, this.#stored)).catch(() => {});
    }
    if (this.#inFlight !== undefined && reply.head >= this.#inFlight) {
      // The round arrived. (A copy that stopped short of it, at a gap, gets the rest after `resendMs`.)
      this.#inFlight = undefined;
      this.#cancelResend?.();
    }
    this.#pump();
  }

  /** Counts a push frame of `bytes` (0: not sent); true when it was sent. */
  #count(bytes: number): boolean {
    if (bytes === 0) return false;
    this.stats.frames++;
    this.stats.bytes += bytes;
    return true;
  }

  /** A remote `HarnessClosed` passes for `closedPassesMs` from the first one heard (an older object's switch), then not. */
  #closedPasses(error: Error): boolean {
    if (!(error instanceof HarnessClosed)) return false;
    const now = this.#clock.now();
    this.#closedSince ??= now;
    return now - this.#closedSince < this.#closedPassesMs;
  }

  #armResend(): void {
    this.#cancelResend?.();
    this.#cancelResend = this.#clock.setTimer(this.#resendMs, () => {
      this.#inFlight = undefined;
      this.#pump();
    });
  }
}
