/**
 * Work that runs strictly one piece after another: each piece starts once everything queued before it has
 * settled, whether it succeeded or failed, and a failure is its caller's alone (the queue goes on). The
 * session's commit line, the agent's admission, a progress writer, the sqlite-wasm connection and its OPFS
 * pool lock are each one of these.
 */
export class SerialQueue {
  #tail: Promise<unknown> = Promise.resolve();

  /** Runs `work` after everything queued before it; settles as `work` does. */
  run<T>(work: () => T | Promise<T>): Promise<T> {
    const next = this.#tail.then(work);
    this.#tail = next.then(noop, noop);
    return next;
  }

  /** Settles (never rejects) once everything queued so far has settled. */
  get idle(): Promise<void> {
    return this.#tail.then(noop);
  }
}

function noop(): void {}
