/**
 * The host's reopens one at a time (decision 0070; moved out of host.ts): a reopen under way — a fenced harness opened
 * again read-only, runHere, leave, a rebuild — is `current`, page calls wait for it, and no other starts beside it. A
 * rebuild asked for meanwhile starts once it ends; one asked for while a rebuild's `run` is under way is that rebuild
 * (no second take of the object's snapshot), and one asked for after its `run` ended is a new request (decision 0078).
 */
export interface ReopenQueueOptions {
  /** Whether the host is closing (nothing starts). */
  closing(): boolean;
  /**
   * Whether a rebuild may start now: the host has a harness and it does not hold its object's lease here (decision
   * 0078: a copy that writes here is never replaced from the object's snapshot).
   */
  mayRebuild(): boolean;
  /** The rebuild's reopen; it calls `runEnded()` once its `run` settled, and never rejects. */
  rebuild(): Promise<void>;
}

export class ReopenQueue {
  readonly #options: ReopenQueueOptions;
  #current: Promise<void> | undefined;
  /** A rebuild's `run` is under way (a request for another one meanwhile is that one). */
  #rebuilding = false;
  /** A rebuild asked for while another reopen ran (decision 0070): started once that one ends. */
  #asked = false;

  constructor(options: ReopenQueueOptions) {
    this.#options = options;
  }

  /** The reopen under way, if one is. */
  get current(): Promise<void> | undefined {
    return this.#current;
  }

  /**
   * Keeps `work` (a reopen) as the one under way. When it ends, a rebuild asked for meanwhile starts (decision 0070):
   * before, `reopening ??=` dropped it — a copy that found it could not follow during a fenced, taken-back or left
   * reopen stayed as it was until the next load.
   */
  track(work: () => Promise<void>, isRebuild = false): Promise<void> {
    this.#rebuilding = isRebuild;
    // Started after `current` is set: what the work hears at once (a takeBack's report) finds it under way.
    const tracked: Promise<void> = Promise.resolve()
      .then(work)
      .finally(() => {
        if (this.#current !== tracked) return;
        this.#current = undefined;
        this.#rebuilding = false;
        if (!this.#asked) return;
        this.#asked = false;
        this.rebuild(); // refused there when the reopened harness now holds the lease (runHere took it back)
      });
    this.#current = tracked;
    return tracked;
  }

  /** A rebuild is asked for: started now, after the reopen under way, or not at all (closing, or refused). */
  rebuild(): void {
    if (this.#options.closing()) return;
    if (this.#current) {
      if (!this.#rebuilding) this.#asked = true; // a rebuild whose run is under way is the one asked for
      return;
    }
    if (!this.#options.mayRebuild()) return;
    this.track(() => this.#options.rebuild(), true);
  }

  /**
   * The rebuild's `run` settled: a request from now on is a new one (decision 0078) — the copy, opened again, found it
   * still cannot follow, or a retry timer asked. Before, one that arrived while the failed rebuild's harness opened
   * again was taken for this rebuild and dropped, and nothing asked again (the worker's timer had fired; its follower,
   * told no more, waited for a reconnect).
   */
  runEnded(): void {
    this.#rebuilding = false;
  }
}
