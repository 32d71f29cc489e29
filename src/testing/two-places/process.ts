/**
 * A place's process in one world of the two-place sweep (sweep.ts): what it runs, the clock whose timers die with
 * it, and how a world's crash is named.
 */
import type { Clock } from "../../base/clock.ts";
import type { Harness } from "../../harness.ts";
import type { Storage } from "../../storage/storage.ts";
import type { ManualClock } from "../clock.ts";
import type { TwoPlaceCrash } from "./types.ts";

/** A world's crash, for its violation's name. */
export function describeCrash(crash: TwoPlaceCrash | undefined): string {
  if (!crash) return "no crash";
  return "place" in crash
    ? `the ${crash.place} crashed right ${crash.edge} its commit ${crash.commit}`
    : `the receiver of message ${crash.message} crashed right ${crash.edge} handling it`;
}

/** A clock for one process on the world's clock: once the process is dead its timers never fire. */
export function processClock(shared: ManualClock, alive: () => boolean): Clock {
  return {
    now: () => shared.now(),
    setTimer: (delayMs, fire) => shared.setTimer(delayMs, () => alive() && fire()),
  };
}

export interface Process {
  alive: boolean;
  storage: Storage & { readonly busy: number; disarm(): void; crash(): Promise<Uint8Array> };
  harness?: Harness;
  /** The storage image a crash left, until the place restarts from it. */
  image?: Uint8Array;
  /** The tab's check of when to leave, between steps. */
  watch?: () => Promise<void>;
  /** The object's side of the hand-over and the mirror (`Arrival`, or the follow link's `ObjectEnd`). */
  arrival?: { readonly harness: Promise<Harness> | undefined; readonly head: number };
  /** The tab's start-up ran. */
  started?: boolean;
}

/** The next macrotask: what a process runs between two sweep steps has run. */
export const macrotask: () => Promise<void> =
  typeof (globalThis as { setImmediate?: unknown }).setImmediate === "function"
    ? () => new Promise((resolve) => (globalThis as unknown as { setImmediate: (f: () => void) => void }).setImmediate(resolve))
    : () => new Promise((resolve) => setTimeout(resolve, 0));
