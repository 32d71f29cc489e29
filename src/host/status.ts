/**
 * What a host says of itself to its pages (part of the protocol, src/host/protocol.ts): where it is in its life
 * (`HarnessStatus`), where the work runs under a lease, and an error as data.
 */
import type { Json } from "../base/json.ts";
import type { Recovery } from "../harness.ts";

/** Where the host is in its life; the page shows it. */
export type HarnessStatus =
  | { kind: "starting" }
  /** Another tab (or a worker that is still shutting down) owns the database; this one waits for it. */
  | { kind: "waiting-for-lock"; database: string }
  | { kind: "opening"; database: string }
  | { kind: "recovering"; database: string }
  /**
   * `recovery`: how the last harness stopped and which tasks a crash cut off (`recovered`: their ids). `role`,
   * set by a browser page's client: "leader" when this tab's worker has the database open, "follower" when
   * the tab reaches the leader tab's worker (the status is then the leader's).
   */
  | {
      kind: "ready";
      database: string;
      recovered: number[];
      recovery: Recovery;
      openMs: number;
      role?: TabRole;
      runs?: Runs;
      /**
       * The lease epoch where the work runs: the one this place writes under while it runs here, else that of the
       * last transaction it holds or followed (it moves live as the lease moves). Absent without a fenced log.
       */
      epoch?: number;
      /**
       * How many forks this place keeps (decision 0039: work it did while fenced that no history holds; read them
       * with `forks()`, drop one with `dismissFork(id)`). Absent when none.
       */
      forks?: number;
      /**
       * While the work runs elsewhere, which place holds the lease, as its object says (decision 0057): `object` (the
       * Durable Object) or `tab` (another tab or device, by its `place` in the lease). Absent until the object said.
       */
      heldBy?: HeldBy;
      /**
       * This copy could not follow its object, could not be rebuilt from the object's snapshot, and the worker
       * stopped asking by itself (decision 0078). Absent otherwise; gone once a rebuild starts again.
       */
      rebuild?: RebuildStopped;
    }
  /**
   * A Durable Object reached by URL: the connection dropped and the page reconnects (`attempt`, the next in
   * `retryInMs`). Calls made now wait for the connection; a reconnect brings the host's own status back. Also a page
   * whose host could not serve a subscription it holds for now (its `authorize` hook threw): over a socket the page asks
   * again on the same connection, calls answered meanwhile; a worker's page asks its worker again (`attempt`, in
   * `retryInMs`; decision 0117 and its second review). The host's own status again once each is served. `error`: why
   * it waits, where the page knows — the last error of a status subscription asked again (its host's authorize hook
   * threw: `AuthorizeFailed`); absent for a dropped connection (decision 0123's review).
   */
  | { kind: "reconnecting"; attempt: number; retryInMs: number; error?: ErrorShape }
  | { kind: "failed"; error: ErrorShape }
  /** Closed cleanly: by `close()`, or because another tab took the database over. */
  | { kind: "closed"; reason: "close" | "takeover" };

/**
 * Under a lease (a worker following its Durable Object, decision 0035): "here" while this host's harness holds the
 * lease and runs the work, "elsewhere" while another place does (the harness here is read-only, or handed over).
 */
export type Runs = "here" | "elsewhere";

/**
 * A rebuild the worker stopped retrying (decision 0078): after `tries` failures in a row of something that passes by
 * itself (the object's take limit busy, decision 0070: 1 s doubling to 30 s), or at once for one that does not (a
 * snapshot larger than the object serves); `error` is the last. The copy stays as it is (read-only, following
 * nothing); the worker tries again when its link reconnects, or when the page calls `retryRebuild()`.
 */
export interface RebuildStopped {
  kind: "stopped";
  tries: number;
  error: ErrorShape;
}

/** The holder of the lease while the work runs elsewhere (decision 0057). */
export interface HeldBy {
  kind: "object" | "tab";
  /** Its place in the lease: the object's name, or another tab's (`tab-<id>`, at most 200 characters). */
  place: string;
}

/** A browser tab's part: its own worker has the database open (leader), or it talks to the leader's (follower). */
export type TabRole = "leader" | "follower";

/** An error as data: its stable name, its message, and the fields its class adds (`SchemaTooNew.found`, …). */
export interface ErrorShape {
  name: string;
  message: string;
  details?: Record<string, Json>;
}
