/** The host's close, step by step (split out of host.ts): what it waits for, then the harness, then the storage. */
import { BACKGROUND_CONTEXT as ctx } from "../base/context.ts";
import type { Harness } from "../harness.ts";
import type { Storage } from "../storage/storage.ts";

export interface CloseSteps {
  /** Still waiting for the database: the wait stops, and nothing was opened. */
  readonly waiting: () => boolean;
  readonly cancelWait: () => void;
  /** The open under way (finished first, then closed) and the reopen under way, each in turn. */
  readonly opening: () => Promise<unknown>;
  readonly reopening: () => Promise<unknown> | undefined;
  readonly harness: () => Harness | undefined;
  readonly endCrashStops: () => void;
  readonly storage: () => Storage | undefined;
  /** Awaited once the harness closed, before the storage closes and the database's lock goes (`HostOptions`). */
  readonly beforeStorageClose?: (() => Promise<void>) | undefined;
}

/** Closes in order; the caller then says "closed" and lets the database's lock go. */
export async function closeInOrder(steps: CloseSteps): Promise<void> {
  if (steps.waiting()) steps.cancelWait(); // nothing to close
  await steps.opening().catch(() => {});
  for (let r = steps.reopening(); r; r = steps.reopening()) await r.catch(() => {}); // one started before opens nothing now
  const harness = steps.harness();
  if (harness) {
    const closed = harness.close(ctx); // first, so a released phase ends without counting as a failure
    steps.endCrashStops();
    await closed;
  }
  const storage = steps.storage();
  if (!storage) return;
  // Its last commits still reach their object, from the open storage (a mirror reads its log tail there), while no
  // other instance can open the database (review of 0133, M1 and L1). A failure here does not keep the storage open.
  await steps.beforeStorageClose?.().catch(() => {});
  await storage.close();
}
