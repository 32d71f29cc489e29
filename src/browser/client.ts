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
 * `WorkerGone` when the worker dies (terminated, crashed) or the client is disposed. Its methods are the
 * host's protocol (src/host/protocol.ts), forwarded one for one; subscriptions resolve with their
 * unsubscribe function.
 */
import { DurableError, WorkerGone } from "../errors.ts";
import { remoteHost } from "../host/endpoint.ts";
import { deserializeError } from "../host/error-wire.ts";
import { PROTOCOL, type ErrorShape, type HarnessStatus, type MethodName, type RemoteHost, type Unsubscribe } from "../host/protocol.ts";
import type { Json } from "../json.ts";
import { wrapHost } from "./comlink.ts";

export type { CrashPointHit, HarnessStatus, Unsubscribe } from "../host/protocol.ts";

/** Methods the client answers itself instead of forwarding (the status is kept on the page). */
const OWN = new Set<MethodName>(["status", "onStatus", "lifeLock", "call"]);

type Forwarded = Omit<RemoteHost, "status" | "onStatus" | "lifeLock" | "call">;

// The forwarded methods are added to the class's prototype from PROTOCOL (see the static block).
export interface HarnessClient extends Forwarded {}

export class HarnessClient {
  readonly worker: Worker;
  readonly #remote: RemoteHost;
  #status: HarnessStatus = { kind: "starting" };
  readonly #statusListeners = new Set<(status: HarnessStatus) => void>();
  readonly #pending = new Set<(error: unknown) => void>();
  #gone: WorkerGone | undefined;

  static {
    for (const name of Object.keys(PROTOCOL) as MethodName[]) {
      if (OWN.has(name)) continue;
      Object.defineProperty(HarnessClient.prototype, name, {
        value(this: HarnessClient, ...args: unknown[]) {
          return this.#track((this.#remote[name] as (...args: unknown[]) => Promise<unknown>)(...args));
        },
        writable: true,
        configurable: true,
      });
    }
  }

  constructor(worker: Worker) {
    this.worker = worker;
    this.#remote = remoteHost(wrapHost(worker));
    // Death is told by the worker's life lock: the page is granted it when the worker is gone. An `error`
    // event only means death before the worker answered at all (its script failed to load or to start);
    // later it is an uncaught exception inside a worker that lives on.
    let started = false;
    worker.addEventListener("error", (event) => {
      if (!started) this.#die(`The database worker failed to start: ${event.message || "its script did not load"}.`);
    });
    void this.#remote.lifeLock().then(
      (name) => {
        started = true;
        const locks = (globalThis.navigator as Navigator | undefined)?.locks;
        if (name && locks) void locks.request(name, () => this.#die("The database worker stopped (terminated or crashed)."));
      },
      () => {},
    );
    void this.#track(
      this.#remote.onStatus((status: HarnessStatus) => {
        this.#status = status;
        for (const listener of this.#statusListeners) listener(status);
      }),
    ).catch(() => {});
  }

  /** The latest status the worker reported. */
  get status(): HarnessStatus {
    return this.#status;
  }

  onStatus(listener: (status: HarnessStatus) => void): Unsubscribe {
    this.#statusListeners.add(listener);
    listener(this.#status);
    return () => void this.#statusListeners.delete(listener);
  }

  /** Resolves once the database is open; rejects if opening failed, the worker died, or it was closed. */
  ready(): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = (status: HarnessStatus) => {
        if (status.kind === "ready") resolve();
        else if (status.kind === "failed") reject(failure(status.error));
        else if (status.kind === "closed") reject(new DurableError(`The database was closed (${status.reason}).`));
        else return;
        unsubscribe();
      };
      const unsubscribe = this.onStatus(check);
      this.#pending.add(reject);
      if (this.#gone) reject(this.#gone);
    });
  }

  /** Calls a method the app's worker added with `serveHarness({ methods })`. */
  call<T = unknown>(method: string, ...args: Json[]): Promise<T> {
    return this.#track(this.#remote.call(method, ...args) as Promise<T>);
  }

  /** Kills the worker at once (a crash, as far as the database is concerned). Pending calls reject. */
  terminate(): void {
    this.worker.terminate();
    this.#die("The database worker was terminated.");
  }

  #die(message: string): void {
    if (this.#gone) return;
    this.#gone = new WorkerGone(message);
    for (const reject of this.#pending) reject(this.#gone);
    this.#pending.clear();
    // The page hears of it like any other status change (a worker closed cleanly stays "closed").
    if (this.#status.kind !== "closed") {
      this.#status = { kind: "failed", error: { name: this.#gone.name, message } };
      for (const listener of this.#statusListeners) listener(this.#status);
    }
  }

  #track<T>(promise: Promise<T>): Promise<T> {
    if (this.#gone) return Promise.reject(this.#gone);
    return new Promise<T>((resolve, reject) => {
      this.#pending.add(reject);
      promise.then(
        (value) => {
          this.#pending.delete(reject);
          resolve(value);
        },
        (error) => {
          this.#pending.delete(reject);
          reject(error);
        },
      );
    });
  }
}

/** Why the open failed, as the library's class of that name (a DurableError of that name for any other). */
function failure(shape: ErrorShape): Error {
  const error = deserializeError(shape);
  return error instanceof DurableError ? error : Object.assign(new DurableError(shape.message), { name: shape.name });
}

export function connectHarness(worker: Worker): HarnessClient {
  return new HarnessClient(worker);
}
