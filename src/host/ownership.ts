/**
 * Who may open the database. A runtime where several instances can start for one database (tabs of one
 * origin) passes an `Ownership`; a runtime that is one instance by construction (a Durable Object) passes none.
 * The browser's is `webLocksOwnership` in src/browser/ownership.ts.
 */
export interface Ownership {
  /**
   * Waits until this instance owns the database and resolves with the function that gives it up. Calls
   * `waiting()` first when another owner holds it. Resolves with undefined when `cancel()` stopped the wait.
   */
  acquire(waiting: () => void): Promise<(() => void) | undefined>;
  /** Stops a wait in progress (a close before the database was ever ours). */
  cancel(): void;
  /** Makes this waiting instance the next owner and asks the current one to close cleanly and let go. */
  requestTakeover(): void;
  /** `handler` runs when another instance asks this one to let go (the host closes, then acquires again). */
  onTakeoverRequest(handler: () => void): void;
  /** The name of a lock held for this instance's whole life, so a client can tell when it died. */
  lifeLock(): Promise<string | undefined>;
}
