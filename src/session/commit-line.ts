import { InvalidCommit } from "../errors.ts";
import type { JsonLimits } from "../limits.ts";
import type { ConversationRecord, DocumentRecord, SubmissionRecord, TaskRecord } from "../storage/records.ts";
import type { Storage } from "../storage/storage.ts";
import { emptyBatch, refuse, resolveStored, type TurnGroup } from "./commit-settle.ts";
import type { Pending, Published } from "./commit-types.ts";
import { GroupOverlay } from "./group.ts";
import { documentKey } from "./keys.ts";
import { isFenceError, LeaseLine } from "./lease-line.ts";
import { publish, type SessionMirror } from "./mirror.ts";
import { markStorageFailure } from "./storage-failure.ts";
import { KernelTx } from "./tx.ts";
import type { TxSource } from "./tx-types.ts";

/**
 * How one turn of the commit line decides, stores and settles its commits (apart from `session.ts`, which queues
 * the turns). `Session` extends it, as it extends `LeaseLine`: nothing made between them per commit.
 *
 * A lone commit's turn (every single task's step) goes without an async frame (decision 0126): the same steps in
 * the same microtask ticks as the general `#storeAll`, with what the storage's callback needs kept on the line
 * itself (`#writing`, `#turnGroup`), which is safe because the line runs one turn at a time and a turn ends only
 * after its write settled.
 */
export abstract class CommitLine extends LeaseLine implements TxSource, SessionMirror {
  abstract readonly storage: Storage;
  abstract readonly limits: JsonLimits;
  abstract readonly live: Map<number, TaskRecord>;
  abstract readonly conversations: Map<number, ConversationRecord>;
  abstract readonly documents: Map<string, DocumentRecord>;
  abstract readonly openSubmissions: Map<number, SubmissionRecord>;
  abstract readonly handoverKeys: Map<string, number>;
  abstract nextId: number;
  abstract rootConversationId: number | undefined;
  /** Storage refused the last transaction: groups go one commit at a time until one is stored. */
  protected refusedLast = false;
  readonly #listeners = new Set<(published: Published) => void>();
  /** The lone commit whose write is in flight (one turn at a time), as the one-member list it came in. */
  #writing: Pending[] | undefined;
  /** The group a lone commit's turn ends (`storeLone`). */
  #turnGroup: TurnGroup | undefined;

  /** Listens to every stored commit. Listeners run synchronously on the line and must not commit. */
  subscribe(listener: (published: Published) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Tells the listeners of a stored commit. */
  protected tell(published: Published): void {
    for (const listener of this.#listeners) listener(published);
  }

  /**
   * A group of one commit (a lone task's step): stored as `store` does, then `group` ends (its `stored` or
   * `failed`, as a `then` of the store: the same ticks as before, decision 0124), with no function made for it.
   */
  protected storeLone(members: Pending[], group: TurnGroup): Promise<void> {
    const stored = this.store(members);
    this.#turnGroup = group;
    return stored.then(this.#groupStored, this.#groupFailed);
  }

  readonly #groupStored = (): void => {
    const group = this.#turnGroup!;
    this.#turnGroup = undefined;
    group.stored();
  };

  readonly #groupFailed = (error: unknown): never => {
    const group = this.#turnGroup!;
    this.#turnGroup = undefined;
    return group.failed(error);
  };

  /**
   * Builds each commit on what the ones before it left, stores the ones that passed in one transaction, then
   * settles them all in order: a commit whose callback or checks threw fails alone and stages nothing, the
   * others are published. Resolves false, with nothing settled, when storage refused a group of more than one
   * commit: what each decided may rest on another one's refused writes. Never throws: a fault rejects.
   */
  protected store(members: Pending[]): Promise<boolean> {
    if (members.length !== 1) return this.#storeAll(members, undefined);
    try {
      const pending = members[0]!;
      const checking = this.#decide(pending, undefined);
      if (checking) return this.#storeAll(members, checking);
      const batch = pending.tx ? pending.batch : undefined;
      if (!batch) {
        this.#settle(members);
        return STORED;
      }
      try {
        this.stamp(batch);
      } catch (lost) {
        refuse(pending, lost); // the lease no longer holds: nothing is stored
        return STORED;
      }
      let applying: Promise<string | void>;
      try {
        // `Promise.resolve`: a storage's thenable is followed as `await` followed it (same ticks).
        applying = Promise.resolve(this.storage.apply(batch));
      } catch (error) {
        return Promise.resolve(this.#refusedAlone(error, members));
      }
      this.#writing = members;
      return applying.then(this.#appliedLone, this.#refusedLone);
    } catch (fault) {
      return Promise.reject(fault);
    }
  }

  readonly #appliedLone = (text: string | void): boolean => {
    const members = this.#writing!;
    this.#writing = undefined;
    this.refusedLast = false;
    this.logged(members[0]!.batch!, text);
    this.#settle(members);
    return true;
  };

  readonly #refusedLone = (error: unknown): boolean => {
    const members = this.#writing!;
    this.#writing = undefined;
    return this.#refusedAlone(error, members);
  };

  /** Nothing was written: a lone commit is refused with the storage's error, and its caller retries it as before. */
  #refusedAlone(error: unknown, members: Pending[]): boolean {
    if (!this.fenceRefused(error) && !isFenceError(error)) markStorageFailure(error);
    refuse(members[0]!, error);
    return true;
  }

  /** `store` with an async frame: a group, or a lone commit whose checks (`first`, its callback already run) are owed. */
  async #storeAll(members: Pending[], first: KernelTx | undefined): Promise<boolean> {
    const group = members.length > 1 ? new GroupOverlay(this) : undefined;
    for (let at = 0; at < members.length; at++) {
      const pending = members[at]!;
      const checking = at === 0 && first ? first : this.#decide(pending, group);
      if (checking)
        try {
          await checking.runChecks();
          this.#decided(pending, checking, group);
        } catch (error) {
          pending.error = error;
        }
    }
    const only = members[0];
    const batch = group ? (group.size > 0 ? group.batch() : undefined) : only?.tx ? only.batch : undefined;
    if (batch) {
      try {
        this.stamp(batch);
      } catch (lost) {
        // The lease no longer holds: nothing of this turn is stored, every commit of it is refused with the reason.
        for (let at = 0; at < members.length; at++) refuse(members[at]!, members[at]!.tx ? lost : members[at]!.error);
        return true;
      }
      let text: string | void;
      try {
        text = await this.storage.apply(batch);
        this.refusedLast = false;
      } catch (error) {
        // Nothing was written. Alone, the commit is refused with the storage's error and its caller retries it
        // as before (no commit is stored twice); a group's commits are decided again, one at a time.
        if (this.fenceRefused(error) || !group) {
          if (!isFenceError(error)) markStorageFailure(error);
          for (let at = 0; at < members.length; at++) refuse(members[at]!, members[at]!.tx ? error : members[at]!.error);
          return true;
        }
        return false;
      }
      this.logged(batch, text);
    }
    this.#settle(members);
    return true;
  }

  /**
   * Runs one commit's callback on a new `KernelTx` (decision 0087: what it built is kept on the commit itself).
   * Returns the tx when its checks are still to run; otherwise the commit is decided (`tx` undefined: its callback
   * or checks threw `error`).
   */
  #decide(pending: Pending, group: GroupOverlay | undefined): KernelTx | undefined {
    pending.tx = undefined;
    try {
      const tx = new KernelTx(this, pending.actor, group);
      const result = pending.body(tx, pending.arg);
      if (typeof (result as { then?: unknown } | null)?.then === "function") {
        throw new InvalidCommit(
          "A commit callback returned a Promise: it must be synchronous. Do the async work before the commit and stage only writes in it.",
        );
      }
      pending.result = result;
      if (tx.hasChecks) return tx;
      this.#decided(pending, tx, group);
    } catch (error) {
      pending.error = error;
    }
    return undefined;
  }

  #decided(pending: Pending, tx: KernelTx, group: GroupOverlay | undefined): void {
    const batch = tx.batch();
    if (batch && group) group.stage(batch, documentKey);
    pending.batch = batch;
    pending.tx = tx;
  }

  /** Settles a turn's decided commits in order: publishes and tells each stored one, refuses the others. */
  #settle(members: Pending[]): void {
    for (let at = 0; at < members.length; at++) {
      const pending = members[at]!;
      const tx = pending.tx;
      if (tx === undefined) {
        refuse(pending, pending.error);
        continue;
      }
      const stored = pending.batch;
      try {
        if (stored) publish(this, stored);
        const reports = tx.reports;
        if (stored || reports.length) this.tell({ batch: stored ?? emptyBatch, reports });
        const callbacks = tx.callbacks; // most often the shared frozen empty list: indexed (see mirror.ts)
        for (let index = 0; index < callbacks.length; index++) callbacks[index]!();
      } catch (error) {
        refuse(pending, error);
        continue;
      }
      resolveStored(pending);
    }
  }
}

/** What a lone turn that wrote nothing (or was refused before writing) resolves with: one promise, shared. */
const STORED: Promise<boolean> = Promise.resolve(true);
