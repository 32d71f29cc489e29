/**
 * The hand-over of a log's lease from one place to another (docs/decisions/0029), over any message link that may
 * lose, duplicate and reorder what it carries. Both sides are state machines: a message in, messages out; a
 * timer on the harness clock resends until the other side answered.
 *
 * - The leaving place stops (`harness.handOver()`: nothing more is written, its head is position P), pushes every
 *   transaction of its log the other side lacks, and once the other side acknowledged P sends `release` at P.
 * - The taking place applies pushed transactions in log order into its copy; at `release` it checks it holds the
 *   log up to P, records the release to itself with its arbiter (no other place may take the lease then), and
 *   opens its harness under the next epoch: that open's
 *   recovery (restarts counted, as after a crash) is the new epoch's first transaction.
 * - A lost release is covered by the lease's expiry: the taking place takes the lease once the arbiter's clock
 *   passes it, from what it holds (everything up to P was acknowledged before any release was sent).
 */
import type { Clock } from "../base/clock.ts";
import { BACKGROUND_CONTEXT } from "../base/context.ts";
import { SerialQueue } from "../base/serial.ts";
import { LeaseNotHeld, StaleEpoch } from "../errors.ts";
import type { Harness, LeaseOptions } from "../harness.ts";
import type { Batch, LogMark } from "../storage/records.ts";
import type { Storage } from "../storage/storage.ts";
import type { LeaseBook, LeaseRecord } from "./arbiter.ts";

/** One stored transaction of a log, with its place in it. */
export type LoggedBatch = Batch & { fence: LogMark };

export type HandOverMessage =
  /** The leaving place's transactions, in any order; the receiver applies those that continue its copy. */
  | { type: "push"; from: string; batches: LoggedBatch[] }
  /** The receiver's copy holds the log up to `head`. */
  | { type: "ack"; head: number }
  /** The leaving place gives up epoch `epoch` at `position`. */
  | { type: "release"; from: string; epoch: number; position: number }
  /** The receiver holds the lease now, under `epoch`. */
  | { type: "taken"; epoch: number };

/** How often an unanswered side sends again, on the harness clock. */
export const RESEND_MS = 200;

/** At most this many transactions go in one push (a push is one message; the rest follow its acknowledgement). */
const PUSH_LIMIT = 64;

/**
 * Applies `batches` to `storage` in log order from `head` + 1, skipping what it holds and stopping at a gap or
 * at a transaction of a superseded epoch (`StaleEpoch`: refused, not applied). Returns the new head.
 */
export async function applyPushed(
  storage: Storage,
  head: number,
  batches: readonly LoggedBatch[],
  apply: (batch: LoggedBatch) => Promise<unknown> = (batch) => storage.apply(batch),
): Promise<number> {
  const sorted = [...batches].sort((a, b) => a.fence.position - b.fence.position);
  for (const batch of sorted) {
    if (batch.fence.position <= head) continue;
    if (batch.fence.position !== head + 1) break;
    try {
      await apply(batch);
    } catch (error) {
      if (error instanceof StaleEpoch) break;
      throw error;
    }
    head = batch.fence.position;
  }
  // What this copy received it need not push again: its sender holds it.
  await storage.trimLog?.(head);
  return head;
}

/** The leaving side: pushes what the other side lacks, then releases at the position it stopped at. */
export class Departure {
  readonly #place: string;
  readonly #storage: Storage;
  readonly #mark: LogMark;
  readonly #send: (message: HandOverMessage) => void;
  readonly #clock: Clock;
  /** The other side's head, as last acknowledged (-1: not heard yet). */
  #acked = -1;
  #done = false;
  #cancel: (() => void) | undefined;

  /** `mark` is what `harness.handOver()` returned; `storage` the leaving harness's (its log is read from it). */
  constructor(options: { place: string; storage: Storage; mark: LogMark; clock: Clock; send(message: HandOverMessage): void }) {
    this.#place = options.place;
    this.#storage = options.storage;
    this.#mark = options.mark;
    this.#send = options.send;
    this.#clock = options.clock;
  }

  /** True once the other side said it holds the lease. */
  get done(): boolean {
    return this.#done;
  }

  /** Sends the first push (or the release) and keeps resending until answered. */
  start(): Promise<void> {
    return this.#tick();
  }

  async receive(message: HandOverMessage): Promise<void> {
    if (this.#done) return;
    if (message.type === "taken") {
      this.#done = true;
      this.#cancel?.();
      return;
    }
    if (message.type !== "ack" || message.head <= this.#acked) return;
    this.#acked = message.head;
    await this.#storage.trimLog?.(Math.min(message.head, this.#mark.position));
    await this.#tick();
  }

  async #tick(): Promise<void> {
    if (this.#done) return;
    this.#cancel?.();
    this.#cancel = this.#clock.setTimer(RESEND_MS, () => void this.#tick());
    const { epoch, position } = this.#mark;
    if (this.#acked >= position) {
      this.#send({ type: "release", from: this.#place, epoch, position });
      return;
    }
    const batches = await readLog(this.#storage, Math.max(0, this.#acked), position);
    this.#send({ type: "push", from: this.#place, batches });
  }
}

export interface ArrivalOptions {
  /** This place's name, as the arbiter grants it the lease. */
  place: string;
  /** This place's copy of the log. */
  storage: Storage;
  /** The lease's arbiter, which lives here. */
  arbiter: LeaseBook;
  clock: Clock;
  send(message: HandOverMessage): void;
  /**
   * Opens this place's harness on its copy under `lease` (the app's options: registry, models, …) and starts it
   * unless it opened read-only (another place took the lease first).
   */
  open(storage: Storage, lease: LeaseOptions): Promise<Harness>;
  /**
   * Stores one pushed transaction in the copy (default `storage.apply`): a follower harness passes its own, so
   * what watches the copy hears each applied transaction as if committed there.
   */
  apply?(batch: LoggedBatch): Promise<void>;
  /**
   * Whether the lease's expiry is watched by a timer on `clock` (default true). A Durable Object passes false:
   * its alarm watches the expiry (`checkExpiry`), and a pending timer would keep it from hibernating.
   */
  watchExpiry?: boolean;
}

/**
 * The taking side, which is also where the lease's arbiter lives: follows pushes into its copy until a release
 * (or the lease's expiry) lets it take the lease; then it holds the harness it opened.
 */
export class Arrival {
  readonly #place: string;
  readonly #storage: Storage;
  readonly #arbiter: LeaseBook;
  readonly #clock: Clock;
  readonly #send: (message: HandOverMessage) => void;
  readonly #open: (storage: Storage, lease: LeaseOptions) => Promise<Harness>;
  readonly #apply: ((batch: LoggedBatch) => Promise<void>) | undefined;
  readonly #watches: boolean;
  #head: number;
  #harness: Promise<Harness> | undefined;
  #cancel: (() => void) | undefined;
  /** Messages and takeovers one at a time: each reads and writes the copy. */
  readonly #line = new SerialQueue();

  private constructor(options: ArrivalOptions, head: number) {
    this.#place = options.place;
    this.#storage = options.storage;
    this.#arbiter = options.arbiter;
    this.#clock = options.clock;
    this.#send = options.send;
    this.#open = options.open;
    this.#apply = options.apply;
    this.#watches = options.watchExpiry ?? true;
    this.#head = head;
  }

  /**
   * Starts the taking side on its copy (at every start of its process): when the arbiter's record says the lease
   * is this place's, or was released at a position the copy holds, it takes it at once (a restarted holder takes a
   * new epoch, and its open counts the restarts); otherwise it follows and watches the lease's expiry.
   */
  static async start(options: ArrivalOptions): Promise<Arrival> {
    const head = (await options.storage.load()).log?.position ?? 0;
    const arrival = new Arrival(options, head);
    const record = options.arbiter.record;
    const released =
      record.holder === undefined &&
      record.releasedAt !== undefined &&
      head >= record.releasedAt &&
      (record.heir === undefined || record.heir === options.place);
    if (record.holder === options.place || released) await arrival.#take();
    else arrival.#watch();
    return arrival;
  }

  /** The harness, once this place holds the lease. */
  get harness(): Promise<Harness> | undefined {
    return this.#harness;
  }

  get head(): number {
    return this.#head;
  }

  receive(message: HandOverMessage): Promise<void> {
    return this.#line.run(() => this.#handle(message));
  }

  async #handle(message: HandOverMessage): Promise<void> {
    if (message.type === "push") {
      if (this.#harness) return; // a holder's copy is its harness's; a late push is of a superseded epoch
      // The holder is handing over and is heard from: its lease holds until the release, however many pushes the
      // rest of its log takes (an expiry now would take over from part of it).
      const record = this.#arbiter.record;
      // No place writes under an epoch the arbiter never minted: a copy that took one would refuse every honest
      // transaction after it as stale, and the takeover's own epoch too (the object wedged for good).
      const unminted = message.batches.find((batch) => batch.fence.epoch > record.epoch);
      if (unminted)
        throw new LeaseNotHeld(
          message.from,
          `epoch ${unminted.fence.epoch} was never granted (the lease is at ${record.epoch}); nothing applied`,
        );
      if (record.holder === message.from) await this.#arbiter.renew(message.from, record.epoch).catch(() => {});
      // The head moves with each stored transaction: a store that fails in the middle of a push keeps what it stored
      // (a head left behind would refuse every later push as out of order).
      const store = this.#apply ?? ((batch: LoggedBatch) => this.#storage.apply(batch));
      const apply = async (batch: LoggedBatch) => {
        await store(batch);
        this.#head = batch.fence.position;
      };
      this.#head = await applyPushed(this.#storage, this.#head, message.batches, apply);
      this.#send({ type: "ack", head: this.#head });
      return;
    }
    if (message.type !== "release") return;
    if (this.#harness) {
      this.#send({ type: "taken", epoch: (await this.#harness).lease?.epoch ?? this.#arbiter.record.epoch });
      return;
    }
    if (this.#head < message.position) {
      this.#send({ type: "ack", head: this.#head }); // not everything arrived: the other side pushes again
      return;
    }
    try {
      await this.#arbiter.release(message.from, message.epoch, message.position, this.#place);
    } catch (error) {
      if (!(error instanceof StaleEpoch || error instanceof LeaseNotHeld)) throw error;
      return; // a release of an epoch that is not current: nothing to take
    }
    const taken = await this.#take();
    if (taken) this.#send({ type: "taken", epoch: taken.lease?.epoch ?? 0 });
  }

  /**
   * Takes the lease now if the holder's expired (a lost release); resolves once the takeover is done. What the
   * watch's timer does, for a platform whose timers do not outlive an eviction (a Durable Object's alarm).
   */
  checkExpiry(): Promise<void> {
    if (!lapsed(this.#arbiter.record, this.#place, this.#clock.now()) || this.#harness) return Promise.resolve();
    return this.#line.run(async () => {
      await this.#take();
    });
  }

  /** Checks the lease's expiry on the harness clock; takes the lease once it passed (a lost release). */
  #watch(): void {
    if (!this.#watches) return;
    this.#cancel = this.#clock.setTimer(RESEND_MS, () => {
      if (!lapsed(this.#arbiter.record, this.#place, this.#clock.now()) || this.#harness) return this.#watch();
      void this.#line.run(() => this.#take());
    });
  }

  /**
   * This place handed the lease back (decision 0038): its harness stopped writing at `position` and the release to
   * the heir is recorded. It follows again from there, and watches the heir's reservation and then its lease.
   */
  handedBack(position: number): void {
    this.#harness = undefined;
    this.#head = position;
    this.#watch();
  }

  /** Opens the harness under the lease; when another place took it first (it opened read-only), follows on. */
  async #take(): Promise<Harness | undefined> {
    this.#cancel?.();
    if (this.#harness) return this.#harness;
    const opening = this.#open(this.#storage, { place: this.#place, arbiter: this.#arbiter });
    this.#harness = opening;
    const harness = await opening;
    if (!harness.readOnly) return harness;
    this.#harness = undefined;
    await harness.close(BACKGROUND_CONTEXT);
    this.#watch();
    return undefined;
  }
}

/**
 * Whether `place` may take the lease over on its own now: another place's lease expired (a lost release), or the
 * lease was released to another place that did not take it in its time (an heir that never came).
 */
function lapsed(record: LeaseRecord, place: string, now: number): boolean {
  if (now < (record.expiresAt ?? Infinity)) return false;
  if (record.holder !== undefined) return record.holder !== place;
  return record.heir !== undefined && record.heir !== place;
}

/** The transactions of `storage`'s log after `after`, up to `through`. */
async function readLog(storage: Storage, after: number, through: number): Promise<LoggedBatch[]> {
  if (!storage.readLog)
    throw new TypeError(`${storage.label} keeps no log to push: use a storage with readLog (MemoryStorage, SqliteStorage).`);
  return (await storage.readLog(after, PUSH_LIMIT)).filter((batch) => batch.fence.position <= through);
}
