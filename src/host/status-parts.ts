/** The parts of a ready status the host reads from its harness and storage. */

import { listForks } from "../follow/fork.ts";
import type { Harness } from "../harness.ts";
import type { Storage } from "../storage/storage.ts";
import { serializeError } from "./error-wire.ts";
import type { ErrorShape } from "./protocol.ts";

/** An error for a status or a report: its serialized form without the stack (statuses and reports are kept). */
export function errorShape(error: unknown): ErrorShape {
  const { stack: _stack, ...shape } = serializeError(error);
  return shape;
}

/** The lease epoch this harness writes under, or else the epoch of its log's head (absent without a log). */
export async function leaseEpoch(harness: Harness): Promise<{ epoch?: number }> {
  const epoch = harness.lease?.epoch ?? (await harness.storage.readEpochs?.())?.at(-1)?.epoch;
  return epoch === undefined ? {} : { epoch };
}

/** The ready status's `forks`: how many forks `storage` keeps, absent when none. */
export async function forkCount(storage: Storage): Promise<{ forks?: number }> {
  const count = (await listForks(storage)).length;
  return count > 0 ? { forks: count } : {};
}
