/**
 * The host's reads (decision 0127): the calls that change nothing answer from whatever copy is open — the read-only
 * copy a take-back or a rebuild is replacing, until the harness that replaces it is open or the storage changes under
 * it — instead of waiting for the reopen, whose link calls (the lease asked back, the snapshot's parts) may be silent.
 * Writes still wait for the reopen (decision 0053). A read whose copy closed under it (replaced) is asked again of the
 * harness that replaced it: it never answers HarnessClosed while a copy is open.
 */
import { HarnessClosed } from "../errors.ts";
import type { Harness } from "../harness.ts";

export interface ReadParts {
  /** The open copy a read answers from now, if one is (ready, or kept open while it is replaced). */
  copy(): Harness | undefined;
  /** The reopen under way (undefined when none is, or the host is closing). */
  switching(): Promise<void> | undefined;
  /** The open harness now, or `DurableError` (not open). */
  requireHarness(): Harness;
}

export function hostReads(parts: ReadParts) {
  /**
   * The copy a read answers from: at once while one is open; otherwise (the harness stopped, or opening: local work;
   * a rebuild whose `run` does not say `closesCopy`: its link calls too, review of 0134, L3) once the reopen under way
   * is done.
   */
  const whenReadable = async (): Promise<Harness> => {
    for (;;) {
      const copy = parts.copy();
      if (copy) return copy;
      const under = parts.switching();
      if (!under) return parts.requireHarness();
      await under.catch(() => {});
    }
  };
  /** `answer` asked of the copy open now; again of the next one when that copy was replaced under it. */
  const read = async <T>(answer: (copy: Harness) => T | Promise<T>): Promise<T> => {
    for (;;) {
      const copy = await whenReadable();
      try {
        return await answer(copy);
      } catch (error) {
        const replaced = copy.closed && (parts.copy() !== undefined || parts.switching() !== undefined);
        if (!(error instanceof HarnessClosed) || !replaced) throw error;
      }
    }
  };
  /** The copy open now (a watch starts on it while the host reopens: decision 0134), undefined when none is. */
  return { read, copy: (): Harness | undefined => parts.copy() };
}
