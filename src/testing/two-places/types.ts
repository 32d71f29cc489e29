import type { Clock } from "../../base/clock.ts";
import type { Harness, LeaseOptions } from "../../harness.ts";
import type { Storage } from "../../storage/storage.ts";
import type { BuiltInInvariant, CrashWorldView, SweepBackend, SweepWorld } from "../sweep/types.ts";
import type { LinkAction } from "./link.ts";

/** What the two-place sweep (./sweep.ts) runs and how: its scenario, where a world crashes, the link and the lease. */

export type Place = "tab" | "object";

export interface TwoPlaceScenario<W = unknown> {
  name: string;
  world?: () => W;
  /** Opens `place`'s harness on `storage` under `lease` with `clock` (the app's registry, models, settings). */
  open(place: Place, storage: Storage, clock: Clock, lease: LeaseOptions, world: SweepWorld<W>): Promise<Harness>;
  /** The tab's start-up, in every tab process that holds the lease (idempotent: make sure the work exists). */
  start(harness: Harness, world: SweepWorld<W>): Promise<void>;
  /** When the tab leaves (checked between steps). */
  leaveWhen(harness: Harness, world: SweepWorld<W>): boolean | Promise<boolean>;
  /** The scenario is finished at the holder. Default: nothing live, no open submission. */
  done?(harness: Harness, world: SweepWorld<W>): boolean | Promise<boolean>;
  /**
   * The effects the tab started (an unsafe tool ran, a model request went out), each with the log position of the
   * commit that recorded its intent: the object's history must hold that very transaction (decision 0032).
   */
  effects?(world: SweepWorld<W>): ReadonlyArray<{ what: string; position: number }>;
  /** With `workerStaysAlive`: the tab's page said it is leaving, and the tab may do nothing from `endsBy` (its clock) on. */
  leftAt?(world: SweepWorld<W>, endsBy: number): void;
  /** Checks of the scenario's own on the holder's storage at the end, after the built-in ones: a message is a violation. */
  invariants?: Array<(view: CrashWorldView<W>) => string | undefined | Promise<string | undefined>>;
}

/** Where a world crashes: a place's `commit`-th storage write, or the `message`-th delivered hand-over message. */
export type TwoPlaceCrash = { place: Place; commit: number; edge: "before" | "after" } | { message: number; edge: "before" | "after" };

export interface TwoPlaceOptions {
  storage?: "memory" | "sqlite" | SweepBackend;
  /** The link's turns: which in-flight message to act on and how; after them the link delivers in order. */
  schedule?: ReadonlyArray<{ pick: number; action: LinkAction }>;
  /** The lease's time on the arbiter's clock. Default 5 s. */
  ttlMs?: number;
  skip?: readonly BuiltInInvariant[];
  maxSteps?: number;
  /**
   * The live mirror (decision 0032): the tab pushes every transaction as it is stored, and its effects wait for
   * the object's acknowledgement (`LeaseOptions.confirm`). Without it the tab pushes only when it hands over.
   */
  mirror?: boolean;
  /**
   * A crashed tab stays away until the object took the lease over (its expiry), and what it had sent and was not
   * delivered dies with it; then it comes back (and opens read-only). Needs `mirror`.
   */
  stayAway?: boolean;
  /**
   * Both places speak the product's follow link (decision 0040): the tab is src/follow/'s `FollowLink`, `remoteArbiter`
   * and `Mirror` (every transaction pushed live, effects waiting for the acknowledgement), the object `ObjectEnd`; the
   * link carries their text frames. Without it the sweep's own `Departure`/`Arrival` (and `LivePush`) speak.
   */
  followLink?: boolean;
  /** With `followLink`: the tab leaves as a closing page's worker does (no drain; the rest and the release at once). */
  leaveAtOnce?: boolean;
  /**
   * With `followLink`: as the tab leaves, its page first says `lease.leaving` at the object's acknowledged head (decision
   * 0101), one more frame on the link (a crash before and after it too).
   */
  pageLeaving?: boolean;
  /**
   * With `pageLeaving` and `stayAway`: the worker never gets its task after `pagehide` (decision 0100's loss) — the
   * page's `lease.leaving` goes out and the tab dies there, before its rest and release, and stays away; the object
   * takes the lease over a grace later. This death is the scenario's, not the world's crash: each world still crashes
   * once more at its own point.
   */
  workerNeverReleases?: boolean;
  /**
   * With `workerNeverReleases`: the worker does not die — it hears its page's word (decision 0113) and runs on, its
   * release never sent. The tab may store nothing from a grace after the word (a violation otherwise); the scenario is
   * told that time (`TwoPlaceScenario.leftAt`).
   */
  workerStaysAlive?: boolean;
  /** Turns of the world (from, to] during which the link drops everything and the tab cannot reach the arbiter. */
  partition?: { from: number; to: number };
}

export interface TwoPlaceResult {
  /** Storage writes of each place and hand-over messages delivered, in the world without a crash. */
  commits: Record<Place, number>;
  messages: number;
  worlds: number;
  /** Worlds (the crash-free one included) that ended with the tab holding a visible fork (decision 0032). */
  forks: number;
  /**
   * Worlds (the crash-free one included) where the object took the lease from the tab after its page said it is
   * leaving and no release came from its worker (decision 0101's grace ran out).
   */
  takenAtLeaving: number;
}
