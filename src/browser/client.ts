/**
 * The page side (`pi-durable-web/client`): talks to the worker that owns the database.
 *
 *   const worker = new Worker(new URL("./worker.ts", import.meta.url), { type: "module" });
 *   const client = connectHarness(worker);
 *   client.onStatus((status) => render(status));
 *   await client.ready();
 *   const id = await client.createTask("example.counter", { to: 5 });
 *
 * A plain comlink call to a dead worker never settles; every call made through the client rejects with
 * `WorkerGone` when the worker dies (terminated, crashed) or the client is disposed. The methods are the
 * host's protocol (`HostClient`, src/host/client.ts); this file adds the worker: comlink, and death told
 * by the worker's life lock.
 */
import { HostClient } from "../host/client.ts";
import { wrapHost } from "./comlink.ts";

export type { CrashPointHit, HarnessStatus, Unsubscribe } from "../host/protocol.ts";

export class HarnessClient extends HostClient {
  readonly worker: Worker;

  constructor(worker: Worker) {
    super(wrapHost(worker));
    this.worker = worker;
    // Death is told by the worker's life lock: the page is granted it when the worker is gone. An `error`
    // event only means death before the worker answered at all (its script failed to load or to start);
    // later it is an uncaught exception inside a worker that lives on.
    let started = false;
    worker.addEventListener("error", (event) => {
      if (!started) this.gone(`The database worker failed to start: ${event.message || "its script did not load"}.`);
    });
    void this.remote.lifeLock().then(
      (name) => {
        started = true;
        const locks = (globalThis.navigator as Navigator | undefined)?.locks;
        if (name && locks) void locks.request(name, () => this.gone("The database worker stopped (terminated or crashed)."));
      },
      () => {},
    );
  }

  /** Kills the worker at once (a crash, as far as the database is concerned). Pending calls reject. */
  terminate(): void {
    this.worker.terminate();
    this.gone("The database worker was terminated.");
  }
}

export function connectHarness(worker: Worker): HarnessClient {
  return new HarnessClient(worker);
}
