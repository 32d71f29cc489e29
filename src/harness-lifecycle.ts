import type { Clock } from "./base/clock.ts";
import { DatabaseLocked } from "./errors.ts";
import type { Recovery } from "./harness-types.ts";
import { documentKey } from "./session/keys.ts";
import type { Session } from "./session/session.ts";
import type { KernelTx } from "./session/tx.ts";
import type { Storage } from "./storage/storage.ts";

/**
 * How a harness's lifetime is recorded: in this process, the one writable harness each storage has (B5); in storage,
 * the lifecycle document from which the next open tells a crash from a clean close. Apart from `harness.ts` because
 * both are bookkeeping around open and close that the harness's calls never read.
 */

/**
 * The writable harness that holds each storage (B5): from the start of `open` until its `close()` has finished.
 * Two writers on one storage would run every step twice; a crashed (abandoned) harness keeps its storage, as a
 * dead process keeps nothing — tests reopen a copy of the image instead.
 */
const holders = new WeakMap<Storage, object>();

/** Whether the harness on a storage is open or was closed cleanly (document `pi.harness` / `lifecycle`). */
const LIFECYCLE = { scope: "pi.harness", key: "lifecycle" } as const;

/** Makes `owner` (a writable harness's options) the holder of `storage`; `DatabaseLocked` when another holds it. */
export function claimStorage(storage: Storage, owner: object): void {
  if (holders.has(storage)) {
    throw new DatabaseLocked(
      `${storage.label} is held by another open harness (or one whose close() has not finished). Close it first, or open this one with readOnly: true.`,
    );
  }
  holders.set(storage, owner);
}

/** Lets `storage` go, if `owner` still holds it. */
export function releaseStorage(storage: Storage, owner: object): void {
  if (holders.get(storage) === owner) holders.delete(storage);
}

/** The stored lifecycle state: `open` (never closed cleanly since), `closed`, or undefined (no open recorded). */
export function storedLifecycle(session: Session): string | undefined {
  const lifecycle = session.documents.get(documentKey(LIFECYCLE.scope, LIFECYCLE.key))?.value as { state?: string } | undefined;
  return lifecycle?.state;
}

/**
 * The storages whose rows were replaced whole by another place's snapshot (decision 0103), until the next open on
 * each reads it. In this process only, as `holders`: the rebuild and the reopen that follows it are one worker's.
 */
const rebuilt = new WeakSet<Storage>();

/**
 * Says that `storage`'s rows were just replaced by another place's snapshot (`rebuildFromObject`): the next open on
 * it reports `stop: "rebuilt"`. The snapshot carries the other place's lifecycle document (`open` while it runs), which
 * that open would otherwise read as a crash here.
 */
export function markRebuilt(storage: Storage): void {
  rebuilt.add(storage);
}

/** The session each open's `Recovery` was made in, for `firstTurn` (a host's ready status: decision 0128). */
const sessions = new WeakMap<Recovery, Session>();

/**
 * What an open recovered: how the last harness stopped (from `lifecycle` and the tasks a crash cut off), or that the
 * rows came whole from another place since (`markRebuilt`; read once, by this open).
 */
export function recoveryAtOpen(session: Session, recovered: number[], lifecycle: string | undefined): Recovery {
  const copied = rebuilt.delete(session.storage) && recovered.length === 0;
  const recovery: Recovery = {
    stop: copied ? "rebuilt" : recovered.length > 0 || lifecycle === "open" ? "crash" : lifecycle === "closed" ? "close" : "none",
    tasks: recovered.map((id) => {
      const record = session.live.get(id);
      return { id, kind: record?.kind ?? "", restarts: record?.restarts ?? 1 };
    }),
  };
  sessions.set(recovery, session);
  return recovery;
}

/** Stages the lifecycle document's new state (`open` at an open, `closed` at a clean close). */
export function markLifecycle(tx: KernelTx, state: "open" | "closed"): void {
  tx.setDocument(LIFECYCLE.scope, LIFECYCLE.key, { state });
}

/**
 * Decision 0128: settles once the tasks resumed by the open that made `recovery` (`harness.recovery`) had their first
 * turn — a turn of the runtime's event loop (`nextTurn`), then every commit queued on the line by then stored (a first
 * step that waited one macrotask for the loop to turn, `eventLoopStarved`, included), then one more turn (the step's
 * caller has gone on). A task that waits for I/O (a model, a page, a person) holds nothing up: the line is idle then.
 * Bounded: what the line holds when asked, and two turns (in a worker whose tasks step back to back, a turn comes
 * within the starvation guard's 50 ms).
 */
export async function firstTurn(recovery: Recovery, nextTurn: () => Promise<void>): Promise<void> {
  const session = sessions.get(recovery);
  await nextTurn();
  if (session) await session.read(() => {});
  await nextTurn();
}

/** Decision 0098: without a task step stored by then, the slices start this long after the open (harness clock). */
export const SLICES_AFTER_MS = 200;

/**
 * Decision 0092: the restarts an open's recovery commit left owed (S4 in slices) are counted on the line, one slice a
 * turn, each after a timer of the harness clock. Decision 0098: the first slice waits for the first group of task
 * steps to be stored (`session.stepStored`: the first resumed step is never queued behind a slice), or for
 * `SLICES_AFTER_MS` when no task steps. Stops at the seal (a close); what is left stays owed in storage and the next
 * open counts it. A refused slice is reported and the rest left owed. A slice runs as `session.read`: a turn of the
 * line that publishes nothing — it stores counts the session's records already hold, so no record, view or listener
 * changes.
 */
export async function recountOwed(session: Session, clock: Clock, report: (error: unknown) => void): Promise<void> {
  const storage = session.storage;
  if (!storage.owesRestarts) return;
  try {
    let cancel: (() => void) | undefined;
    await Promise.race([session.stepStored, new Promise<void>((resolve) => (cancel = clock.setTimer(SLICES_AFTER_MS, resolve)))]);
    cancel?.();
    while (storage.owesRestarts && !session.sealed) {
      await new Promise<void>((resolve) => clock.setTimer(0, resolve));
      if (session.sealed || !(await session.read(() => storage.recountSlice!()))) return;
    }
  } catch (error) {
    if (!session.sealed) report(error);
  }
}
