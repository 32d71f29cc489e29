/**
 * Staying responsive. Every operation is synchronous wasm behind a promise, so a task that only commits
 * (phase, commit, next phase, …) runs entirely in microtasks and the worker's event loop never turns.
 * Measured in Chromium 156: such a worker does not answer its page for as long as the burst lasts, and it
 * does not stop when its page reloads — it keeps the OPFS access handles (and the database lock), so the
 * reloaded page cannot open the database (still blocked after 90 s). An operation that finds the loop has
 * not turned for STARVATION_MS first waits one macrotask: about 0.05 ms every 50 ms of back-to-back work.
 */
const STARVATION_MS = 50;
/** A macrotask is queued since `burstStart`; it clears this flag when the loop gets to it. */
let probing = false;
let burstStart = 0;

/** True when the event loop has not turned for `STARVATION_MS` (the caller should wait `nextMacrotask()`). */
export function eventLoopStarved(): boolean {
  if (!probing) {
    probing = true;
    burstStart = performance.now();
    later(() => (probing = false));
    return false;
  }
  return performance.now() - burstStart > STARVATION_MS;
}

export function nextMacrotask(): Promise<void> {
  return new Promise((resolve) => later(resolve));
}

/** What waits for the next macrotask (a starvation wait, the probe's end), in the order it was asked for. */
const waiting = new Set<() => void>();

function later(callback: () => void): void {
  const once = () => {
    if (waiting.delete(once)) callback();
  };
  waiting.add(once);
  afterMacrotask(once);
}

/**
 * Runs now, in this task, what waits for the next macrotask (decision 0100): a leaving page's worker may get no second
 * task, so its hand-over must not sit behind an operation that yields to the event loop — the transaction on the
 * commit line goes on in this task's microtasks instead, and the release after it. The probe starts again from now:
 * operations started in this task do not yield for another `STARVATION_MS`.
 */
export function runWaitingNow(): void {
  for (const run of [...waiting]) run();
}

/** A macrotask without timer clamping: `setImmediate` in Node, a MessageChannel message in browsers. */
const afterMacrotask: (callback: () => void) => void = (() => {
  if (typeof setImmediate === "function") return (callback) => void setImmediate(callback);
  if (typeof MessageChannel !== "function") return (callback) => void setTimeout(callback, 0);
  const queue: Array<() => void> = [];
  const channel = new MessageChannel();
  channel.port1.onmessage = () => queue.shift()?.();
  return (callback) => {
    queue.push(callback);
    channel.port2.postMessage(null);
  };
})();
