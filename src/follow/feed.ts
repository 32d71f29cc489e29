/**
 * The object's pushes to the tabs that follow it (docs/decisions/0038), platform-neutral: while the object's harness
 * holds the lease, every transaction it stores goes to each following connection — the tab's mirror the other way.
 *
 * - A connection follows from its own head (`follow`, after the tab's `follow.from` call): what it lacks is read
 *   from the object's durable log tail (its own transactions stay there), then it gets each new one live.
 * - Coalesced: one round in flight per connection; whatever is stored meanwhile goes in the next one. The tab's
 *   `ack` says its head: a round it held moves on; an ack within the round waits for the rest (a gap, a lost push, is sent again at the resend).
 * - A round unanswered for `resendMs` goes again (five times, then six more further and further apart, up to 32
 *   times `resendMs`; then the connection waits for its next `ack` or the next transaction). A connection whose head is unknown (a socket that outlived the object's instance,
 *   `rejoin`) is pushed the newest transaction alone: the tab answers with its head, and the feed goes on from it.
 */
import type { Clock } from "../base/clock.ts";
import type { Harness } from "../harness.ts";
import type { Storage } from "../storage/storage.ts";
import { packPushes } from "./chunks.ts";
import { historyWindow } from "./fork.ts";
import type { LoggedBatch } from "./handover.ts";
import { encodeFollowMessage, type FollowStart, type LeaseHolder } from "./wire.ts";

export interface FeedOptions {
  /** The object's place (the pushes' `from`). */
  place: string;
  /** The object's copy of the log: its harness's storage. */
  storage: Storage;
  clock: Clock;
  /** A round unanswered this long goes again. Default 2,000 ms. */
  resendMs?: number;
  /** Transactions read from the durable tail for one round. Default 256. */
  roundLimit?: number;
  /**
   * Bytes of stored transactions read from the durable tail for one round (at least one transaction is, whatever its
   * size). Default 4 MiB (decision 0047): a lagging tab's round of 256 transactions of 2 MB each is not read at once.
   */
  roundBytes?: number;
  /**
   * Transactions the durable tail keeps behind the head while this place's harness holds the lease (decision 0047):
   * older ones are trimmed, and a tab further behind rebuilds from the object's snapshot instead. A connected tab
   * that lags keeps the tail for it up to `8 × keepLog` behind. Default 1,024; `Infinity` trims nothing.
   */
  keepLog?: number;
  /**
   * Positions a tab will follow from soon (the snapshots the object serves, decision 0047): the tail after each is
   * kept as for a connected tab that lags.
   */
  holds?: () => readonly number[];
  /** Who holds the lease now, by the object's own record (decision 0057): told in every push and `follow.from` answer. */
  holder?: () => LeaseHolder | undefined;
}

/**
 * Rounds sent again `resendMs` apart without an answer; then `BACKOFFS` more, the wait doubling each time up to
 * `BACKOFF_LIMIT × resendMs` (about three minutes in all at the default): a round whose frames were lost, with no
 * transaction after it, reaches a tab whose link loses many in a row. After them the connection waits for its next
 * `ack` or transaction: a pending timer would keep a Durable Object from hibernating, and a tab that answers nothing
 * for that long is frozen or gone (a socket loses no frame without closing; a reconnect asks again).
 */
const RESENDS = 5;
const BACKOFFS = 6;
const BACKOFF_LIMIT = 32;
/**
 * Transactions kept in memory for connections that lag, at most this many and at most `roundBytes` of them (the
 * newest one always); older ones are read from the durable tail, which is read by bytes too.
 */
const BUFFERED = 256;
/** The default of `FeedOptions.roundBytes`. */
const ROUND_BYTES = 4 << 20;
/** How far behind the head a connected, lagging tab keeps the tail from being trimmed, in `keepLog`s. */
const LAGGING_KEEPS = 8;

interface Following {
  send(frame: string): void;
  /** The connection's head, as it last said (undefined: not heard in this instance). */
  acked: number | undefined;
  /** The last position of the round in flight. */
  inFlight: number | undefined;
  /** The head the round in flight continues (undefined: a probe, or a round still reading the tail). */
  roundFrom: number | undefined;
  /** The last round that started reading the tail. */
  reading: object | undefined;
  resends: number;
  cancel: (() => void) | undefined;
  /** The head it was told it is behind at (`behind`): not told again, nor pushed, until it follows from elsewhere. */
  behind: number | undefined;
}

export class Feed {
  readonly #options: FeedOptions;
  readonly #followers = new Map<unknown, Following>();
  #buffer: LoggedBatch[] = [];
  /** The JSON length of each buffered transaction (as the stored tail counts it), and their sum. */
  #bufferSizes: number[] = [];
  #bufferBytes = 0;
  #epoch = 0;
  /** The last position the harness stored (0 while no harness holds the lease here). */
  #stored = 0;
  #stopLog: (() => void) | undefined;
  /** Whether the tail is pushed without a harness (`hold`). */
  #serving = false;
  /** The position the durable tail was last trimmed through here, and whether a trim is under way. */
  #trimmed = 0;
  #trimming = false;

  constructor(options: FeedOptions) {
    this.#options = options;
  }

  /** The harness that took the lease here: what it stores is pushed from now on. */
  attach(harness: Harness): void {
    const lease = harness.lease;
    if (!lease) return;
    // What a tab pushed and this feed relayed up to the takeover stays in memory (decision 0094): the copy trimmed it
    // from the durable tail, so a follower not yet sent it would be told `behind` and rebuild its whole copy.
    const newest = this.#buffer.at(-1)?.fence.position;
    const relayed = this.#serving && newest !== undefined && newest === this.#stored && newest <= lease.position ? this.#buffer : [];
    this.detach();
    for (const batch of relayed) this.#keep(batch);
    this.#serving = false;
    this.#epoch = lease.epoch;
    this.#stored = lease.position;
    this.#stopLog = harness.onLog((batch) => {
      this.#stored = batch.fence.position;
      this.#keep(batch);
      for (const following of this.#followers.values()) {
        // Head unknown (a rejoined connection): the newest transaction alone makes the tab say its head.
        if (following.acked === undefined && following.inFlight === undefined) this.#send(following, [batch]);
        else this.#pump(following);
      }
      this.#trim();
    });
    for (const following of this.#followers.values()) this.#pump(following);
  }

  /**
   * Without a harness here (this instance of the object started after it handed the lease back, say), what the
   * durable tail holds up to `head` is still pushed to a connection that lacks it: a tab taking the lease back
   * needs everything up to the release.
   */
  hold(head: number): void {
    if (this.#stopLog) return;
    this.#stored = head;
    this.#serving = true;
    for (const following of this.#followers.values()) this.#pump(following);
  }

  /** Whether a harness here holds the lease and what it stores is pushed (`attach`). */
  get attached(): boolean {
    return this.#stopLog !== undefined;
  }

  /**
   * A tab that holds the lease pushed `batches`, applied to the copy up to `head` (decision 0090): they go on to the
   * others that follow, from memory (the copy trims what a pusher sent); one further behind is told it is behind.
   */
  relay(head: number, batches: readonly LoggedBatch[]): void {
    if (this.#stopLog) this.detach();
    this.#epoch = 0; // each push names its newest transaction's epoch: the tab's, not this place's last
    for (const batch of batches) if (batch.fence.position > this.#stored && batch.fence.position <= head) this.#keep(batch);
    this.#stored = head;
    this.#serving = true;
    const newest = this.#buffer.at(-1);
    for (const following of this.#followers.values()) {
      // Head unknown (a connection that followed the object's last instance): the newest transaction makes it say it.
      if (following.acked === undefined && following.inFlight === undefined && newest?.fence.position === head)
        this.#send(following, [newest]);
      else this.#pump(following);
    }
  }

  /** The harness stopped writing here (it handed the lease over): nothing more is pushed. */
  detach(): void {
    this.#stopLog?.();
    this.#stopLog = undefined;
    this.#serving = false;
    this.#buffer = [];
    this.#bufferSizes = [];
    this.#bufferBytes = 0;
    this.#stored = 0;
    for (const following of this.#followers.values()) {
      following.cancel?.();
      following.inFlight = undefined;
    }
  }

  /**
   * Where a connection can start following: this copy's history (for the tab's `continuesHistory`) and `after`, the
   * earliest head the durable tail can push from. `head` is the copy's last position.
   */
  async start(head: number, tail: { from: number; to: number } = { from: 0, to: head }): Promise<FollowStart> {
    const storage = this.#options.storage;
    const epochs = (await storage.readEpochs?.()) ?? [];
    const epoch = epochs.filter((stretch) => stretch.start <= head).at(-1)?.epoch;
    const first = (await storage.readLog?.(0, 1))?.[0]?.fence.position;
    const holder = this.#options.holder?.();
    return {
      ...(holder ? { holder } : {}),
      head: head > 0 && epoch !== undefined ? { epoch, position: head } : null,
      // Only what the tab's log tail needs (decision 0051): all of them pass the link's 1 MB frame after tens of
      // thousands of takeovers.
      epochs: historyWindow(epochs, tail.from, tail.to),
      after: Math.min(first === undefined ? head : first - 1, this.#memoryReach(head)),
    };
  }

  /**
   * The earliest head the feed can push from memory (what it keeps runs without a gap up to `head`; else `head`). A tab's
   * pushes are kept only here (0090): told from the tail alone, a device whose snapshot they overtook rebuilt in a loop (0099).
   */
  #memoryReach(head: number): number {
    const oldest = this.#buffer[0]?.fence.position;
    if (oldest === undefined || !(this.#stopLog || this.#serving)) return head;
    const contiguous = this.#buffer.at(-1)!.fence.position === head && head - oldest + 1 === this.#buffer.length;
    return contiguous ? oldest - 1 : head;
  }

  /** `connection` follows from `head` (it holds the log up to there); `send` reaches it. */
  follow(connection: unknown, send: (frame: string) => void, head: number): void {
    const following = this.#connection(connection, send);
    following.acked = head;
    following.inFlight = undefined;
    following.cancel?.();
    this.#pump(following);
  }

  /** A connection that followed an earlier instance of the object (its socket outlived it): its head is unknown. */
  rejoin(connection: unknown, send: (frame: string) => void): void {
    this.#connection(connection, send);
  }

  /** Whether `connection` follows. */
  follows(connection: unknown): boolean {
    return this.#followers.has(connection);
  }

  /**
   * The connection's `ack`: it holds the log up to `head`. The tab answers each push frame it applied, so a round of
   * several frames hears several: one short of the round's end while it moves on within the round means the rest is
   * on its way (sending again now would send the rest twice, and an ack per frame would repeat the whole tail); the
   * resend timer covers a frame lost meanwhile (a gap: the head stops moving).
   */
  ack(connection: unknown, send: (frame: string) => void, head: number): void {
    const following = this.#connection(connection, send);
    const moved = following.acked === undefined || head > following.acked;
    following.acked = head;
    following.resends = 0;
    const round = following.inFlight;
    if (round !== undefined && head < round && following.roundFrom !== undefined && head >= following.roundFrom) {
      if (moved) this.#arm(following);
      return;
    }
    // The round arrived, or the tab stands where it cannot continue it (a probe, a head moved back): the next round
    // starts from `head`.
    following.inFlight = undefined;
    following.cancel?.();
    this.#pump(following);
  }

  /** The connection closed. */
  drop(connection: unknown): void {
    this.#followers.get(connection)?.cancel?.();
    this.#followers.delete(connection);
  }

  /**
   * Buffers `batch` for lagging connections: the oldest go while more than `BUFFERED` are kept or their JSON takes
   * more than `roundBytes` (decision 0053: 256 transactions of 2 MB each were half a gigabyte held in the object's
   * 128 MB, and a round served from memory was not bounded by bytes). The newest stays, whatever its size.
   */
  #keep(batch: LoggedBatch): void {
    const size = JSON.stringify(batch).length;
    this.#buffer.push(batch);
    this.#bufferSizes.push(size);
    this.#bufferBytes += size;
    const budget = this.#options.roundBytes ?? ROUND_BYTES;
    while (this.#buffer.length > 1 && (this.#buffer.length > BUFFERED || this.#bufferBytes > budget)) {
      this.#buffer.shift();
      this.#bufferBytes -= this.#bufferSizes.shift()!;
    }
  }

  #connection(connection: unknown, send: (frame: string) => void): Following {
    let following = this.#followers.get(connection);
    if (!following) {
      following = {
        send,
        acked: undefined,
        inFlight: undefined,
        roundFrom: undefined,
        reading: undefined,
        resends: 0,
        cancel: undefined,
        behind: undefined,
      };
      this.#followers.set(connection, following);
    }
    following.send = send;
    return following;
  }

  /**
   * Trims the durable tail to `keepLog` transactions behind the head (in steps of a sixteenth of it), or to the
   * slowest connected tab's head (or a served snapshot's, `holds`) when that is within `LAGGING_KEEPS × keepLog`. One trim at a time; a failed one is
   * tried again at a later transaction.
   */
  #trim(): void {
    const keep = this.#options.keepLog ?? 1_024;
    const storage = this.#options.storage;
    if (this.#trimming || !storage.trimLog || !Number.isFinite(keep)) return;
    let through = this.#stored - keep;
    const behind = [...this.#followers.values()].map((following) => following.acked);
    for (const head of [...behind, ...(this.#options.holds?.() ?? [])])
      if (head !== undefined && head < through && head >= this.#stored - LAGGING_KEEPS * keep) through = head;
    if (through - this.#trimmed < Math.max(1, Math.floor(keep / 16))) return;
    this.#trimming = true;
    storage.trimLog(through).then(
      () => {
        this.#trimmed = through;
        this.#trimming = false;
      },
      () => void (this.#trimming = false),
    );
  }

  #pump(following: Following): void {
    if (!(this.#stopLog || this.#serving) || following.inFlight !== undefined || following.acked === undefined) return;
    if (following.acked >= this.#stored || following.behind === following.acked) return;
    void this.#round(following, following.acked);
  }

  /** One round: what the connection lacks after `acked`, from memory when it holds it, else from the durable tail. */
  async #round(following: Following, acked: number): Promise<void> {
    following.inFlight = this.#stored;
    following.roundFrom = undefined; // an ack while the tail is read starts the round again from its head
    const token = (following.reading = {});
    let batches = this.#buffer.filter((batch) => batch.fence.position > acked);
    if (batches[0]?.fence.position !== acked + 1) {
      const storage = this.#options.storage;
      const { roundLimit = 256, roundBytes = ROUND_BYTES } = this.#options;
      batches = storage.readLog ? await storage.readLog(acked, roundLimit, roundBytes) : [];
    }
    // Past what the tail keeps (the tab was told `after` at its start), or the connection moved on meanwhile.
    if (batches[0]?.fence.position !== acked + 1 || following.acked !== acked || !(this.#stopLog || this.#serving)) {
      if (following.reading === token) following.inFlight = undefined; // else a newer round is on its way
      const first = batches[0]?.fence.position;
      if (following.reading === token && following.acked === acked && first !== undefined && first > acked + 1)
        this.#behind(following, first - 1);
      return;
    }
    this.#send(following, batches);
  }

  /**
   * The tail was trimmed past the connection's head while it followed (it lagged more than `LAGGING_KEEPS × keepLog`,
   * decision 0053): told once at this head, so the tab asks `follow.from` again and rebuilds instead of waiting
   * for a reconnect. Before, it stalled here until its socket dropped.
   */
  #behind(following: Following, after: number): void {
    following.behind = following.acked;
    try {
      following.send(encodeFollowMessage({ type: "behind", after }));
    } catch {
      // the connection is gone: its close drops it
    }
  }

  #send(following: Following, batches: LoggedBatch[]): void {
    following.inFlight = batches.at(-1)!.fence.position;
    following.roundFrom = following.acked;
    const holder = this.#options.holder?.();
    for (const load of packPushes(batches)) {
      try {
        following.send(
          encodeFollowMessage({
            type: "push",
            from: this.#options.place,
            epoch: this.#epoch || batches.at(-1)!.fence.epoch,
            ...(holder ? { holder } : {}),
            ...load,
          }),
        );
      } catch {
        break; // the connection is gone: its close drops it
      }
    }
    this.#arm(following);
  }

  /** The round in flight goes again if no ack moves it on for `resendMs`. */
  #arm(following: Following): void {
    following.cancel?.();
    const backoff = Math.min(BACKOFF_LIMIT, 2 ** Math.max(0, following.resends + 1 - RESENDS));
    following.cancel = this.#options.clock.setTimer((this.#options.resendMs ?? 2_000) * backoff, () => {
      following.cancel = undefined;
      following.inFlight = undefined;
      if (++following.resends <= RESENDS + BACKOFFS) this.#pump(following);
    });
  }
}
