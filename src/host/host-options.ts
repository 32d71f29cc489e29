/** What a runtime adapter hands `createHost` (its storage, ownership, lease moves and clock), and what it gets back. */
import type { LivePace } from "../agent/view/live-frames.ts";
import type { PageCallPort } from "../follow/page-call-relay.ts";
import type { LeaseHolder } from "../follow/wire.ts";
import type { Harness, HarnessOptions } from "../harness.ts";
import type { Storage } from "../storage/storage.ts";
import type { HostMethod } from "./harness-methods.ts";
import type { Ownership } from "./ownership.ts";
import type { HarnessService } from "./protocol.ts";

export interface HostOptions {
  /** How statuses name the database (for example "default pool:/pi-durable.sqlite3"). */
  database: string;
  /** Opens the runtime's storage; called once this instance owns the database. */
  openStorage: () => Promise<Storage>;
  /** Registry, settings, models, env, resume… for `Harness.open`; the host adds `onReport` and `crashPoint`. */
  harness: Omit<HarnessOptions, "onReport" | "crashPoint">;
  /**
   * The harness is a read-only copy that follows another place's log without a lease of its own (a Durable Object's
   * copy served while a tab holds the lease): a page's watch of a conversation it has not received yet waits for it
   * (decisions 0103, 0107). A host under a lease (`harness.lease`) follows whenever its harness is read-only anyway.
   */
  follows?: boolean;
  /** Who may open the database (Web Locks in a browser). Default: this instance owns it outright. */
  ownership?: Ownership;
  /** Extra methods for `client.call(name, ...args)`. */
  methods?: Record<string, HostMethod>;
  /**
   * The page leaves (`leave`): a host under its object's lease hands it over (decision 0035). True once the object
   * took it. The host opens its harness again on the same storage, read-only, when `handedOver` is told (the harness
   * gave the lease up and stops, before the object answers: decision 0125, so a page's reads wait for no link), so a
   * page that stays reads its copy at once, follows the object live once it answered and may `runHere` (decision 0045).
   */
  leave?: (handedOver: () => void) => Promise<boolean>;
  /**
   * `runHere`: a host under its object's lease whose harness is read-only asks for the lease back; resolves once the
   * object released it here and the storage holds everything up to the release (decision 0038). The host then
   * opens its harness again on the same storage (under the lease: writable now), and the page's views move to it.
   */
  takeBack?: () => Promise<void>;
  /**
   * A host whose storage can be rebuilt from elsewhere (decision 0047: a worker following its object with
   * `follow.rebuild`): each time `when`'s listener is called the host awaits `run(storage, closeCopy)` (the copy
   * replaced from the object's snapshot), opens the harness again on it and moves the page's views there. `run` calls
   * `closeCopy` once the snapshot is fetched, before anything in the storage changes: until then the read-only copy
   * answers the page's reads (decision 0127) — only when `closesCopy` is true. Without it the host closes the copy
   * before `run` (it cannot tell when `run` changes the storage), and reads wait for the rebuilt copy. Before, the host
   * guessed from `run.length < 2` (decision 0132), which a default or rest parameter or a forwarding wrapper misread
   * (its review, L2). A `run` that says `closesCopy` and writes before calling `closeCopy` lets reads meanwhile answer
   * from the copy whose rows it replaces; one that never calls it has the copy closed after it.
   * `stopped(listener)` tells the host when the copy stopped asking by itself (decision 0078: the ready status then says
   * `rebuild: { kind: "stopped", … }`); `again()` starts its count afresh, for the page's `retryRebuild()`.
   */
  rebuild?: {
    when(listener: () => void): void;
    run(storage: Storage, closeCopy: () => Promise<void>): Promise<void>;
    /** `run` calls `closeCopy` before it changes the storage (`TabFollow.rebuild` does). Default: false. */
    closesCopy?: boolean;
    stopped?(listener: (tries: number, error: unknown) => void): void;
    again?(): void;
  };
  /**
   * Tells the host each time a fork was kept in its storage (decision 0039: a worker following its object), so
   * the ready status counts it (`forks`).
   */
  onFork?: (listener: () => void) => void;
  /**
   * Tells the host who holds the lease each time its object says (decision 0057: a worker following its object), so
   * a ready status that runs elsewhere names the holder (`heldBy`). Undefined: free, or this place's own record.
   */
  onHolder?: (listener: (holder: LeaseHolder | undefined) => void) => void;
  /**
   * Where the page's page tool calls go while the conversation runs elsewhere (decision 0044: a worker following its
   * object claims, answers and releases them at the object); undefined, or returning undefined: the harness here.
   */
  pageCallsElsewhere?: () => PageCallPort | undefined;
  /**
   * The host's `close()` awaits it once the harness closed, before the storage closes and the database's lock is let go
   * (not at a takeover): a worker following its object lets the tab's last commits reach it (review of 0133, M1).
   */
  beforeStorageClose?: () => Promise<void>;
  /** Called once the harness is open, before the host reports it ready to `ready` (not to the status). */
  onReady?: (harness: Harness) => void | Promise<void>;
  /**
   * Whether `armCrashPoint` may stop the harness at a named crash point (the test hook of
   * pi-durable-web/testing and crash tests). Default true; false makes it reject with `CrashPointsOff`.
   */
  crashPoints?: boolean;
  /**
   * Settles at the runtime's next turn of its event loop (a browser worker: a 0 ms timer). Given, an open that resumed
   * tasks a crash cut off tells `ready` after it, so those tasks' first turn (every step they store without waiting for
   * I/O, and its caller going on) comes before the ready status — with 10,000 of them, 10,000 ids and objects copied
   * to every page (decision 0128). Absent: `ready` at once.
   */
  nextTurn?: () => Promise<void>;
  /** A monotonic clock in ms, for `openMs` in the ready status. */
  now: () => number;
  /**
   * The pace of live view updates (partial answers, tool output) on the clock `now`: at most one per
   * `frameMs`, a timer for the rest of a frame. Default: each one at once.
   */
  liveFrames?: Omit<LivePace, "now">;
}

/** A host and its life. */
export interface ServedHost {
  service: HarnessService;
  /** Resolves with the harness once it is open (rejects if opening failed). */
  ready: Promise<Harness>;
  /** How many listeners the host holds for subscriptions (status, reports, tasks, conversation views). */
  listenerCount(): number;
}
