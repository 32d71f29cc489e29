/**
 * Calls a listener across a boundary: neither a throw nor a rejection reaches the caller. A listener's throw is its
 * owner's bug, not the caller's: one listener of many never keeps the others from being told, and nothing of it
 * reaches a transport's frame handler (decision 0117). `failed` hears what it threw or rejected with (a harness's
 * commit listeners: its `onReport`, decision 0147); without it the failure is dropped (a page that went away).
 */
export function safely(call: () => unknown, failed: (error: unknown) => void = ignore): void {
  try {
    const result = call();
    if (result && typeof (result as Promise<unknown>).catch === "function") (result as Promise<unknown>).catch(failed);
  } catch (error) {
    failed(error);
  }
}

function ignore(): void {
  // the listener's own failure (a page that went away, an app's bug): the others are still told
}

/**
 * `listener`, called `safely`, its failures told to `failed` once until it is heard without failing again (decision
 * 0147's review, M1): a listener that fails at every call makes one report, not one per call — so the reports' window
 * keeps the real ones, and an `onReport` that writes (a commit, so a call) cannot loop on it.
 */
export function failingOnce<T>(listener: (value: T) => unknown, failed: (error: unknown) => void): (value: T) => void {
  let failing = false;
  const fail = (error: unknown) => {
    if (failing) return;
    failing = true;
    failed(error);
  };
  const well = () => {
    failing = false;
  };
  return (value) =>
    safely(() => {
      const result = listener(value);
      if (result && typeof (result as Promise<unknown>).then === "function") return (result as Promise<unknown>).then(well);
      well();
      return result;
    }, fail);
}
