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
 * the promise settles, so the caller's next commit can take it again. A grouped commit's promise is its group's
 * end followed by `settle` (decision 0087): the session's `resolve`/`reject` only keep its outcome, and `settle`
 * frees the record and gives it.
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
  /** A grouped commit's outcome, kept until its group ends (`settle`, decision 0087). */
  #outcome: typeof UNSETTLED | typeof STORED | typeof REFUSED = UNSETTLED;
  #value: unknown = undefined;
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
    const resolve = this.#resolve;
    if (resolve === undefined) this.#keep(STORED, value);
    else {
      this.#free();
      resolve(value);
    }
  }

  reject(error: unknown): void {
    const reject = this.#reject;
    if (reject === undefined) this.#keep(REFUSED, error);
    else {
      this.#free();
      reject(error);
    }
  }

  /**
   * A grouped commit's promise is its group's end followed by this (decision 0087): it frees the record and gives
   * the commit's own outcome, kept by `resolve` or `reject` when the session settled it. The record stays busy until
   * then, so a commit made meanwhile through the same caller takes a record of its own, never this outcome.
   */
  readonly settle = (): unknown => {
    const outcome = this.#outcome;
    const value = this.#value;
    this.#free();
    if (outcome === STORED) return value;
    if (outcome === REFUSED) throw value;
    throw new Error("internal: a commit's group ended without settling it");
  };

  #keep(outcome: typeof STORED | typeof REFUSED, value: unknown): void {
    this.#outcome = outcome;
    this.#value = value;
  }

  #free(): void {
    this.busy = false;
    this.arg = undefined;
    this.#resolve = undefined;
    this.#reject = undefined;
    this.#outcome = UNSETTLED;
    this.#value = undefined;
  }
}

const UNSETTLED = 0;
const STORED = 1;
const REFUSED = 2;
