/**
 * The page's conversation views and page tool watches held by the host (split out of host.ts, decision 0140). Each
 * is a `rebind`: told the harness the host opened next, it moves there (one snapshot, then that harness's commits);
 * told an error, no harness will come and it ends, its owner's `lost` told once. They move at a reopen (host-reopen.ts:
 * a take-back, a rebuild, a leave, a fenced stop) and, since decision 0140, across a takeover: another tab took the
 * database, the host queues for it again, and the views wait, silent (bound to the closed harness, which tells
 * nothing), until the host opens it again — or end when it never will (a close for good, an open that failed).
 */
import { safely } from "../base/safely.ts";
import type { Harness } from "../harness.ts";

export type Rebind = (next: Harness | Error) => void;

export function hostViews() {
  const rebinds = new Set<Rebind>();
  return {
    /** Each view's move. */
    rebinds,
    /** Moves every view to `next`; one that cannot move (its owner told) never keeps the others where they were. */
    move(next: Harness | Error): void {
      for (const rebind of [...rebinds]) safely(() => rebind(next));
    },
  };
}
