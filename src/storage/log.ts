import { LogOutOfOrder, StaleEpoch } from "../errors.ts";
import type { LogMark } from "./records.ts";

/**
 * The fenced log's rule, the same in every backend (docs/decisions/0029), checked inside the transaction that
 * would write `fence`: a commit continues the log at its head + 1 and under an epoch no older than the head's.
 * Returns true when the commit starts a new epoch (its position is where that epoch's stretch begins).
 */
export function continuesLog(head: LogMark | undefined, fence: LogMark, where: string): boolean {
  const epoch = head?.epoch ?? 0;
  const position = head?.position ?? 0;
  if (fence.epoch < epoch) throw new StaleEpoch(fence.epoch, epoch, where);
  if (fence.position !== position + 1) throw new LogOutOfOrder(fence.position, position, where);
  return fence.epoch > epoch;
}
