/** The parts of a ready status the host reads from its harness and storage. */

import { DurableError } from "../errors.ts";
import { listForks } from "../follow/fork.ts";
import type { Harness } from "../harness.ts";
import { firstTurn } from "../harness-lifecycle.ts";
import type { Storage } from "../storage/storage.ts";
import { markWaitingFor, serializeError } from "./error-wire.ts";
import type { ErrorShape, HarnessStatus } from "./protocol.ts";

/** An error for a status or a report: its serialized form without the stack (statuses and reports are kept). */
export function errorShape(error: unknown): ErrorShape {
  const { stack: _stack, ...shape } = serializeError(error);
  return shape;
}

/**
 * The ready status's `recovered` and `recovery`, told after `firstTurn` when the open resumed tasks a crash cut off
 * (decision 0128): the tasks take their first turn — the first step stored and its caller gone on — before the status
 * goes out, with 10,000 of them 10,000 ids and 10,000 objects copied to each page that watches it. Both are the open's
 * (`harness.recovery`: each task's restarts as the open counted them), whenever they are told.
 */
export async function recoveryParts(
  harness: Harness,
  nextTurn: (() => Promise<void>) | undefined,
): Promise<Pick<HarnessStatus & { kind: "ready" }, "recovered" | "recovery">> {
  const tasks = harness.recovery.tasks;
  if (nextTurn && tasks.length > 0 && !harness.readOnly) await firstTurn(harness.recovery, nextTurn);
  return { recovered: tasks.map((task) => task.id), recovery: harness.recovery };
}

/** The lease epoch this harness writes under, or else the epoch of its log's head (absent without a log). */
export async function leaseEpoch(harness: Harness): Promise<{ epoch?: number }> {
  const epoch = harness.lease?.epoch ?? (await harness.storage.readEpochs?.())?.at(-1)?.epoch;
  return epoch === undefined ? {} : { epoch };
}

/** The ready status's `forks`: how many forks `storage` keeps, absent when none. */
export async function forkCount(storage: Storage): Promise<{ forks?: number }> {
  const count = (await listForks(storage)).length;
  return count > 0 ? { forks: count } : {};
}

/**
 * The host's harness did not open again (a reopen's open failed; decision 0117, later): the status is `failed`, and the
 * error returned ends the page's views (before, they stayed bound to the closed harness, silent).
 */
export function notOpened(error: unknown, setStatus: (status: HarnessStatus) => void): Error {
  setStatus({ kind: "failed", error: errorShape(error) });
  return error instanceof Error ? error : new DurableError("The database did not open again.");
}

/**
 * The host's "not open" (`DurableError`) for a call while `status` is not ready. Waiting for the lock, it names the
 * database another place has open (`waitingFor`, decision 0142): a page that cannot see this host's status (its hook
 * refused it) follows the tab that has it (browser/tabs/follower.ts), where the status would have sent it.
 */
export function notOpen(status: HarnessStatus): DurableError {
  const error = new DurableError(`The database is not open (status: ${status.kind}).`);
  if (status.kind !== "waiting-for-lock") return error;
  // `waitingFor` for whoever reads the error; the mark, which an app's error cannot carry, for the page (review L2).
  return markWaitingFor(Object.assign(error, { waitingFor: status.database }), status.database);
}

/**
 * The waits of calls made during an open under way (`starting`, `opening`, `recovering`; decision 0138). A page's call
 * reaches the host then when the page could not see the status (its own worker's hook refused it): it waits for the
 * open, as the page's calls wait while the status it sees says so (before: "not open (status: starting)"). A host
 * waiting for the lock (`waiting-for-lock`) answers "not open" at once, as before.
 */
export function openWaits() {
  let next: { promise: Promise<void>; resolve: () => void } | undefined;
  return {
    /** The status changed: each wait looks again. */
    moved() {
      next?.resolve();
      next = undefined;
    },
    /** Settles at the next status while `status` is an open under way; undefined otherwise. */
    during(status: HarnessStatus): Promise<void> | undefined {
      if (!OPENING.has(status.kind)) return undefined;
      if (!next) {
        let resolve!: () => void;
        const promise = new Promise<void>((done) => (resolve = done));
        next = { promise, resolve };
      }
      return next.promise;
    },
  };
}
const OPENING = new Set<HarnessStatus["kind"]>(["starting", "opening", "recovering"]);
