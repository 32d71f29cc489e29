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
}

/** A commit waiting on the line for its turn. */
export interface Pending {
  body: (tx: KernelTx) => unknown;
  actor: TxActor | undefined;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/** A commit of a group that passed its callback and checks, waiting for the group's transaction. */
export interface Built {
  pending: Pending;
  tx: KernelTx;
  result: unknown;
  batch: Batch | undefined;
}
