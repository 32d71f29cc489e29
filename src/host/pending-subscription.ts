/**
 * A subscription answered later (decision 0107): a watch that waits for its conversation (decision 0103) is a promise
 * that settles once the conversation arrived or will not come. Until then its caller may go away — a page that
 * closed, a socket gone, a subscribe the page unsubscribed before its answer — and what the host registered for it
 * (a commit listener, a view) must go with it. Such a promise carries `cancel()`: it ends the wait (the promise then
 * rejects, to no one) and releases what it held. Each layer that wraps the promise (the doors, an endpoint, the
 * copy service) passes `cancel` on, so the transport that sees its caller leave can call it.
 */
/** A promise of a subscription (or of its id) that can be given up before it settles. */
export type PendingSubscription<T = () => void> = Promise<T> & { cancel(): void };

/** `promise`, given up by `cancel`. */
export function pendingSubscription<T>(promise: Promise<T>, cancel: () => void): PendingSubscription<T> {
  return Object.assign(promise, { cancel });
}

/** Whether `subscribed` is a pending subscription: one its host may answer later (or one that can be given up). */
export function isPending(subscribed: unknown): subscribed is PendingSubscription<unknown> {
  return subscribed instanceof Promise && typeof (subscribed as { cancel?: unknown }).cancel === "function";
}

/** Gives up `subscribed` when it is a pending subscription (anything else: nothing to do). */
export function cancelPending(subscribed: unknown): void {
  if (isPending(subscribed)) subscribed.cancel();
}

/** `next` (made from `pending` by `then`/`catch`), given up as `pending` is, when that is a pending subscription. */
export function keepCancel<T>(pending: Promise<unknown>, next: Promise<T>): Promise<T> {
  const { cancel } = pending as { cancel?: unknown };
  return typeof cancel === "function" ? pendingSubscription(next, () => cancelPending(pending)) : next;
}
