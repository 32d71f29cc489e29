/**
 * The host's side of a page's leave (decision 0035): the harness hands its object's lease over and the host opens its
 * copy again read-only — at the hand-over, so reads wait for no answer (decision 0125) — or, offline, runs here still.
 */
import type { Harness } from "../harness.ts";
import type { HostOptions } from "./host-options.ts";
import type { HarnessStatus } from "./protocol.ts";
import type { ReopenQueue } from "./reopen-queue.ts";

export interface LeaveParts {
  readonly leave: HostOptions["leave"];
  readonly harness: () => Harness | undefined;
  readonly closing: () => boolean;
  readonly status: () => HarnessStatus;
  readonly setStatus: (next: HarnessStatus) => void;
  /** The object took the lease: the holder it named last is no longer the one (it tells again once the copy follows). */
  readonly holderGone: () => void;
  readonly queue: ReopenQueue;
  /** Opens the harness again on its storage, tracked on the queue (what `reopen` resolves with is dropped). */
  readonly reopen: (readOnly?: true) => Promise<void>;
}

export function hostLeave(parts: LeaveParts) {
  const { queue } = parts;
  /** The leave under way, settled either way: `runHere` asked meanwhile decides after it (review of 0125, L2). */
  let underWay: Promise<void> | undefined;

  const leave = async (): Promise<void> => {
    const leaving = parts.harness();
    /** The copy opened at the hand-over: a failure is the leave's (review of 0125, L1), never an unhandled rejection. */
    let early: Promise<void> | undefined;
    const handedOver = parts.leave?.(() => {
      // Given up and stopping: opened again read-only now (local work only), so reads wait for no answer (decision 0125).
      if (parts.harness() !== leaving || !leaving?.closed || parts.closing() || queue.current) return;
      parts.holderGone(); // the holder named before is not who holds the lease now (review of 0125, L3)
      early = parts.reopen(true);
      early.catch(() => {});
    });
    const status = parts.status();
    if (status.kind === "ready" && status.runs === "here") parts.setStatus({ ...status, runs: "elsewhere" });
    // Within this task the rest and the release went out (all a closing page may send); the rest is for a page that stays.
    let taken: boolean | undefined;
    try {
      taken = await handedOver;
    } catch (error) {
      // Unanswered past the lease's expiry (HandOverUnanswered), or refused (StaleEpoch): the object takes (took) the
      // lease. Open read-only like a taken leave (decision 0057), unless the hand-over's copy is (0125).
      if (!parts.closing() && !queue.current && leaving && parts.harness() === leaving && (leaving.closed || leaving.readOnly))
        void parts.reopen(true).catch(() => {});
      await queue.current?.catch(() => {});
      throw error;
    }
    if (!taken) {
      // The object took nothing (offline): the harness runs here still, and the status says so again.
      const current = parts.harness();
      const now = parts.status();
      if (current && !current.readOnly && !current.closed && now.kind === "ready" && now.runs === "elsewhere")
        parts.setStatus({ ...now, runs: "here" });
      return;
    }
    if (parts.closing()) return;
    parts.holderGone(); // told again by the object once this copy follows it
    // The copy opened at the hand-over (0125): the leave resolves once it is open, and rejects with its error.
    if (early) return early;
    // Read-only: the object took the lease. Opened so, it asks the object nothing (decision 0133: a writable open
    // asked the lease over the link while no copy was open, and every read waited for it).
    if (!queue.current && parts.harness() === leaving) void parts.reopen(true).catch(() => {});
    return queue.current;
  };

  return {
    leave(): Promise<void> {
      const left = leave();
      const settled = left.then(
        () => {},
        () => {},
      );
      underWay = settled;
      void settled.then(() => {
        if (underWay === settled) underWay = undefined;
      });
      return left;
    },
    /** Settled once no leave is under way. */
    async settled(): Promise<void> {
      while (underWay) await underWay;
    },
  };
}
