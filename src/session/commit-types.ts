import type { Report } from "../reports.ts";
import type { Batch } from "../storage/records.ts";
import type { KernelTx } from "./tx.ts";
import type { TxActor } from "./tx-types.ts";

/** What one stored commit changed; delivered synchronously to session listeners, in commit order. */
export interface Published {
  readonly batch: Batch;
  reports: readonly Report[];
}

export interface CommitOptions {
  /** Admitted after the seal (close's own bookkeeping). */
  whileSealed?: boolean;
  /**
   * May share one storage transaction with the other groupable commits ready in the same turn of the line
   * (decision 0026): a task's own commits, whose callbacks read only through their `tx`.
   */
  group?: boolean;
  /**
   * Told how the commit settled, synchronously, right before its promise settles (decision 0049): a task
   * invocation's bookkeeping of storage refusals without a promise and an async frame of its own on every step.
   */
  settled?: CommitSettled;
}

/** How a commit settled: `stored` once it is durable and published, `refused` with whatever it is rejected with. */
export interface CommitSettled {
  stored(): void;
  refused(error: unknown): void;
}

/** A commit waiting on the line for its turn. */
export interface Pending {
  body: (tx: KernelTx, arg: unknown) => unknown;
  /** What `body` is called with beside its `tx`: a hot caller's one body for all its commits needs no closure each. */
  arg: unknown;
  actor: TxActor | undefined;
  resolve(value: unknown): void;
  reject(error: unknown): void;
  settled: CommitSettled | undefined;
  /**
   * What `Session` built for it in its turn (decision 0087: kept here, not in an entry object a commit), cleared
   * as it settles: the transaction once its callback and checks passed (undefined: they threw `error`), the
   * callback's result and the batch it staged.
   */
  tx: KernelTx | undefined;
  result: unknown;
  batch: Batch | undefined;
  error: unknown;
}
