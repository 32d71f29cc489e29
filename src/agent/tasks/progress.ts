import type { Context } from "../../base/context.ts";
import { SerialQueue } from "../../base/serial.ts";
import type { Tx } from "../../session/tx.ts";
import type { TaskRuntime } from "../../tasks/types.ts";

/** The part of a task runtime progress needs (any task's runtime fits). */
export interface ProgressRuntime {
  readonly signal: AbortSignal;
  setTimer: TaskRuntime["setTimer"];
  commit(change: (tx: Tx) => undefined, context: Context): Promise<void>;
}

/**
 * Lazy persistence of running progress (S8, S9): a change is committed at most `withinMs` after it happened,
 * on the harness clock; changes in between ride along in the same commit. `withinMs = 0` commits every change
 * (one commit in flight, the next right after it). A crash loses at most the last window.
 *
 * The write reads the caller's latest state when the commit runs, so it always persists the newest output.
 */
export class LazyProgress {
  readonly #runtime: ProgressRuntime;
  readonly #withinMs: number;
  readonly #write: (tx: Tx) => void;
  readonly #context: Context;
  readonly #onError: (error: unknown) => void;
  readonly #onPersisted: (() => Promise<void>) | undefined;
  #dirty = false;
  #stopped = false;
  #cancelTimer: (() => void) | undefined;
  readonly #line = new SerialQueue();

  constructor(
    runtime: ProgressRuntime,
    withinMs: number,
    write: (tx: Tx) => void,
    context: Context,
    onError: (error: unknown) => void,
    /** Runs after each progress commit (a named crash point). */
    onPersisted?: () => Promise<void>,
  ) {
    this.#runtime = runtime;
    this.#withinMs = withinMs;
    this.#write = write;
    this.#context = context;
    this.#onError = onError;
    this.#onPersisted = onPersisted;
  }

  /** Something changed: make sure it is committed within the window. */
  touch(): void {
    if (this.#stopped) return;
    this.#dirty = true;
    if (this.#withinMs === 0) {
      void this.#flush();
      return;
    }
    this.#cancelTimer ??= this.#runtime.setTimer(this.#withinMs, () => {
      this.#cancelTimer = undefined;
      void this.#flush();
    });
  }

  /** Stops persisting and waits for the commit in flight; the caller's final commit carries the rest. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
    await this.#line.idle;
  }

  #flush(): Promise<void> {
    return this.#line.run(async () => {
      if (!this.#dirty || this.#stopped) return;
      this.#dirty = false;
      try {
        await this.#runtime.commit((tx) => {
          this.#write(tx);
          return undefined;
        }, this.#context);
        await this.#onPersisted?.();
      } catch (error) {
        // Once the invocation is signalled (close, abort mark) progress simply stops; anything else is news.
        if (!this.#runtime.signal.aborted) this.#onError(error);
      }
    });
  }
}
