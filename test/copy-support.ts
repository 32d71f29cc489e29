import { SerialQueue } from "../src/base/serial.ts";
import { type LeaseBook, memoryArbiter } from "../src/follow/arbiter.ts";
import { applyPushed, type LoggedBatch } from "../src/follow/handover.ts";
import { Harness, type HarnessOptions, type Storage } from "../src/index.ts";
import { createManualClock, type ManualClock } from "../src/testing/clock.ts";
import { ctx } from "./support.ts";

/**
 * Two places of one log in one process (decision 0034): the holder ("tab") writes under the lease; the copy
 * ("object") is a read-only harness on its own storage that follows every transaction the holder stores, pushed
 * as the live mirror pushes them (each stored transaction, read back from the holder's durable log tail).
 */
export interface TwoPlaces {
  tab: Harness;
  copy: Harness;
  tabStorage: Storage;
  copyStorage: Storage;
  clock: ManualClock;
  arbiter: LeaseBook;
  /** The copy's head (the last position it applied). */
  readonly head: number;
  /** Resolves once everything stored at the holder so far is applied at the copy. */
  caughtUp(): Promise<void>;
  /** Stops pushing (the link is down) or starts again (`true`: catches up at once). */
  link(up: boolean): Promise<void>;
}

export async function openTwoPlaces(
  stores: { tab: Storage; copy: Storage },
  options: Omit<HarnessOptions, "lease" | "clock" | "readOnly">,
  clock: ManualClock = createManualClock(1_000),
): Promise<TwoPlaces> {
  const arbiter = memoryArbiter({ clock });
  const tab = await Harness.open(stores.tab, { ...options, clock, lease: { place: "tab", arbiter } }, ctx);
  const copy = await Harness.open(stores.copy, { ...options, clock, readOnly: true }, ctx);
  const line = new SerialQueue();
  let head = 0;
  let up = true;
  const push = () =>
    line.run(async () => {
      if (!up) return;
      const batches: LoggedBatch[] = (await stores.tab.readLog!(head, 64)) as LoggedBatch[];
      head = await applyPushed(stores.copy, head, batches, (batch) => copy.follow(batch, ctx));
    });
  tab.onLog(() => void push());
  await push();
  const caughtUp = async () => {
    while (up && head < (tab.lease?.position ?? 0)) await push();
  };
  return {
    tab,
    copy,
    tabStorage: stores.tab,
    copyStorage: stores.copy,
    clock,
    arbiter,
    get head() {
      return head;
    },
    caughtUp,
    async link(next) {
      up = next;
      if (next) await caughtUp();
    },
  };
}
