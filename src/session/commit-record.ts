import type { Batch } from "../storage/records.ts";
import type { CommitOptions, CommitSettled, Pending } from "./commit-types.ts";
import type { KernelTx, TxActor } from "./tx.ts";

/**
 * A commit record its caller reuses, commit after commit (decision 0077): a task invocation's steps each made a
 * pending record and a promise executor closure, kept alive until their group was stored. Only the record is
 * reused, never the promise: every commit still returns a promise of its own (`Session.commitThrough`), settled
 * once. While the record is on the line (`busy`: queued, or in a group being decided, stored or retried after a
 * refusal) a second commit through it goes as an ordinary commit with a record of its own, so two commits in
 * flight never share one. Settling frees it (and drops the change and the promise's functions it held) before
 * the promise settles, so the caller's next commit can take it again.
 */
export class CommitRecord implements Pending {
  readonly body: (tx: KernelTx, arg: unknown) => unknown;
  readonly actor: TxActor | undefined;
  readonly options: CommitOptions;
  readonly settled: CommitSettled | undefined;
  arg: unknown = undefined;
  tx: KernelTx | undefined = undefined;
  result: unknown = undefined;
  batch: Batch | undefined = undefined;
  error: unknown = undefined;
  /** On the line and not settled yet. */
  busy = false;
  #resolve: ((value: unknown) => void) | undefined = undefined;
  #reject: ((error: unknown) => void) | undefined = undefined;
  /** The promise's executor, made once: it keeps the promise's functions here. */
  readonly executor = (resolve: (value: unknown) => void, reject: (error: unknown) => void): void => {
    this.#resolve = resolve;
    this.#reject = reject;
  };

  constructor(body: (tx: KernelTx, arg: never) => unknown, actor: TxActor | undefined, options: CommitOptions) {
    this.body = body as (tx: KernelTx, arg: unknown) => unknown;
    this.actor = actor;
    this.options = options;
    this.settled = options.settled;
  }

  resolve(value: unknown): void {
    const resolve = this.#resolve!;
    this.#free();
    resolve(value);
  }

  reject(error: unknown): void {
    const reject = this.#reject!;
    this.#free();
    reject(error);
  }

  #free(): void {
    this.busy = false;
    this.arg = undefined;
    this.#resolve = undefined;
    this.#reject = undefined;
  }
}
