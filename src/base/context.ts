/**
 * Every async call takes a chord `Context`: cancellation travels with it, and a cancelled context rejects
 * only the caller's wait, never the shared durable work behind it.
 */
export type { Context } from "@earendil-works/chord";
export { awaitWithContext, BACKGROUND_CONTEXT } from "@earendil-works/chord/context";

import type { Context } from "@earendil-works/chord";
import { awaitWithContext } from "@earendil-works/chord/context";

/** Throws the context's abort reason when it is already cancelled. */
export function throwIfCancelled(context: Context): void {
  // A task invocation's context can tell without making its signal (it makes one only on demand).
  if ((context as { cancelled?: boolean }).cancelled === false) return;
  const signal = context.abortSignal;
  if (signal?.aborted) {
    throw signal.reason instanceof Error ? signal.reason : new DOMException("The operation was aborted", "AbortError");
  }
}

/** Awaits `promise` for a caller; the caller's cancellation rejects the wait, not the work. */
export function waitFor<T>(promise: Promise<T>, context: Context): Promise<T> {
  return awaitWithContext(promise, context);
}
