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
 * by the worker's life lock. `connectHarness(url)` reaches a Durable Object host (pi-durable-web/cloudflare)
 * over a WebSocket instead, with the same client: a dropped connection comes back by itself and its
 * subscriptions resume (./socket.ts; a call waits for it 60 s at most, then `NotReady`, decision 0151); a call the object answers `NotReady` (its switch after a hand-back) is sent again
 * by itself when `PROTOCOL` lets it, under one key (./not-ready-resend.ts, decision 0139).
 */
import { systemClock } from "../base/clock.ts";
import { NotReady } from "../errors.ts";
import { HostClient } from "../host/client.ts";
import { shapeOf } from "../host/error-wire.ts";
import { type HarnessStatus, PAGE_TEST_HOOK, type TabRole } from "../host/protocol.ts";
import { wrapHost } from "./comlink.ts";
import { LeavingSocket, pageLeaves, ticketIn } from "./leaving.ts";
import { resendingNotReady } from "./not-ready-resend.ts";
import { type ReconnectingEndpoint, type SocketLike, socketEndpoint } from "./socket.ts";
import { type TabsEndpoint, tabsEndpoint } from "./tabs/follower.ts";
import { STATUS_ASK_MS } from "./tabs/own-status.ts";

export { ConnectionLost } from "../errors.ts";
export type { Fork, ForkedTransaction, KeptFork } from "../follow/fork.ts";
export type { Recovery } from "../harness.ts";
export type { PageToolCall, PageToolImplementation, ProvidePageToolsOptions } from "../host/page-tools.ts";
export type { CrashPointHit, HarnessStatus, HeldBy, TabRole, Unsubscribe } from "../host/protocol.ts";
export type { SocketLike } from "./socket.ts";

/** The origin's storage as the browser reports it; sizes in bytes, absent where the browser does not tell. */
export interface StorageEstimateResult {
  usage?: number;
  quota?: number;
  /** Whether the browser keeps this origin's storage under pressure (see `persistStorage()`). */
  persisted: boolean;
}
export { applyViewUpdate, ConversationView, ConversationViewStore } from "../agent/view/view-store.ts";

export class HarnessClient extends HostClient {
  /** The worker that owns the database (undefined for a Durable Object reached by URL). */
  readonly worker: Worker | undefined;
  readonly #socket: ReconnectingEndpoint | undefined;
  readonly #tabs: TabsEndpoint | undefined;
  /** The page's own follow socket for its word that it is leaving (decision 0101), for a worker that follows an object. */
  readonly #leaving: LeavingSocket | undefined;

  constructor(target: Worker | { url: string; connect?: () => SocketLike }) {
    if ("url" in target) {
      const url = target.url.replace(/^http/, "ws");
      /** The attempt of the `unserved` the socket told last (undefined: its last state was another). */
      let unserved: number | undefined;
      const connected = socketEndpoint(target.connect ?? (() => new WebSocket(url) as SocketLike), {
        // While the page reconnects, its status says so; the host's status comes back with the connection. While the
        // open connection cannot serve a subscription now, it says reconnecting too (as a worker's page does; decision
        // 0117), and the host's last status once every one is served again.
        onState: (state) => {
          if (state.state === "open") {
            // Every subscription served again on the open connection; or a new connection, which asks the host's status
            // again if the host had ended it (decision 0117, later).
            if (unserved !== undefined) this?.hostStatusAgain();
            else this?.watchStatusAgain();
            unserved = undefined;
            return;
          }
          // The socket tells no lower attempt within one wait: a lower one after an `unserved` is a new wait, whose
          // attempt and retry the page shows (decision 0123's review, L5; decision 0137).
          const fresh = state.state === "unserved" && unserved !== undefined && state.attempt <= unserved;
          unserved = state.state === "unserved" ? state.attempt : undefined;
          // Unserved: held until every subscription is served (the host's status arrives meanwhile; 0117's third review).
          const { attempt, retryInMs } = state;
          const error = state.state === "unserved" ? state.error : undefined; // why it waits (decision 0123's review)
          this?.transportStatus({ kind: "reconnecting", attempt, retryInMs, ...(error && { error }) }, unserved !== undefined, fresh);
        },
      });
      // A call the object answers NotReady (its switch after a hand-back) goes again by itself for a while (decision 0139).
      const socket = resendingNotReady(connected, { clock: systemClock });
      super(socket, `page-${crypto.randomUUID()}`);
      this.worker = undefined;
      this.#socket = socket;
      this.#tabs = undefined;
      this.#leaving = undefined;
      pageClients().add(this); // pi-durable-web/testing's waitForReady finds a page's object client too
      return;
    }
    const worker = target;
    // This tab's worker while it has the database open, the leader tab's worker while another tab has it.
    const tabs = tabsEndpoint(wrapHost(worker));
    super(tabs, `page-${crypto.randomUUID()}`);
    this.worker = worker;
    this.#socket = undefined;
    this.#tabs = tabs;
    // The worker tells its page where its object stands while it holds the lease (decision 0101).
    const leaving = (this.#leaving = new LeavingSocket());
    worker.addEventListener("message", (event: MessageEvent) => {
      const ticket = ticketIn(event.data);
      if (ticket !== undefined) leaving.told(ticket);
    });
    pageClients().add(this);
    // A worker that follows its Durable Object hands the lease over as the page leaves (decision 0035); for any
    // other worker `leave` does nothing, and a reload stays the crash.
    globalThis.addEventListener?.("pagehide", this.#leave);
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

  /**
   * "leader" while this tab's worker has the database open, "follower" while this tab reaches the leader
   * tab's worker; undefined until one of them is ready (and for a Durable Object).
   */
  get role(): TabRole | undefined {
    const { status } = this;
    return status.kind === "ready" ? status.role : undefined;
  }

  /**
   * At `pagehide`: the page's own `lease.leaving` first (its socket's send arrives even when the worker never gets its
   * next task, decision 0101), then the worker told that it went out (`LEAVING_SAID`, decision 0113) and `leave` posted
   * to it, whose release wins within the object's grace.
   */
  readonly #leave = () => pageLeaves(this.#leaving, this.worker, () => this.leave());

  protected override gone(message: string): void {
    globalThis.removeEventListener?.("pagehide", this.#leave);
    pageClients().delete(this);
    this.#tabs?.close();
    this.#leaving?.close();
    super.gone(message);
  }

  /**
   * The app's answer to this page may have changed (a sign-in, a permission granted): asks again at once what an
   * `authorize` hook refused or failed — this client's status subscription; on a tab that follows another, the leader
   * tab's door too (decision 0132: otherwise a refused follower asks again by itself at most once a minute). Over a
   * socket, the host's status is asked again on the open connection when the host ended it. Nothing when nothing was
   * refused. Resolves, once each ask is answered, with the status then (decision 0138): `ready` when the hook lets it,
   * `failed` when it refuses again, `reconnecting` while it throws; at once with the status when nothing was asked. A
   * `ready()` called meanwhile settles by that answer too, not by the refusal shown before it. Over a socket, an ask with
   * no answer in 15 s (the tabs' bound) resolves with `reconnecting` (`NotReady`); the host's answer is shown when it comes.
   */
  askAgain(): Promise<HarnessStatus> {
    const asked = this.watchStatusAgain();
    return this.statusAsked(Promise.all([this.#tabs?.askAgain(), this.#socket ? this.#bounded(asked) : asked]));
  }

  /**
   * The socket's status ask waited for at most `STATUS_ASK_MS`, as the tabs' is (./tabs/own-status.ts; the review of 0138,
   * M1: a host whose hook never answered left `askAgain()` and `ready()` pending for good). Then the refusal shown gives
   * way to `reconnecting` (`NotReady`, nothing retried: the ask is still under way); a later answer is the host's status.
   */
  #bounded(asked: Promise<void>): Promise<void> {
    return new Promise((resolve) => {
      let answered = false;
      const cancel = systemClock.setTimer(STATUS_ASK_MS, () => {
        if (!answered && this.status.kind === "failed") {
          const error = new NotReady(
            `The status ask had no answer in ${STATUS_ASK_MS / 1000} s (an authorize hook or the host did not answer).`,
          );
          this.transportStatus({ kind: "reconnecting", attempt: 1, retryInMs: 0, error: shapeOf(error) });
        }
        resolve();
      });
      void asked.then(() => {
        answered = true;
        cancel();
        resolve();
      });
    });
  }

  /**
   * Asks the browser to keep this origin's storage (the OPFS database) under storage pressure instead of
   * evicting it: `navigator.storage.persist()`. Resolves true when storage is persistent (granted now or
   * before), false when the browser declined or has no such API. Browsers may grant it only after a user
   * gesture or to an installed app; asking again later is fine.
   */
  async persistStorage(): Promise<boolean> {
    const storage = (globalThis.navigator as Navigator | undefined)?.storage;
    if (!storage?.persist) return false;
    if (await storage.persisted()) return true;
    return storage.persist();
  }

  /** How much the origin stores and may store (`navigator.storage.estimate()`), and whether it is persistent. */
  async storageEstimate(): Promise<StorageEstimateResult> {
    const storage = (globalThis.navigator as Navigator | undefined)?.storage;
    if (!storage?.estimate) return { persisted: false };
    const [estimate, persisted] = await Promise.all([storage.estimate(), storage.persisted?.() ?? false]);
    return {
      ...(estimate.usage !== undefined ? { usage: estimate.usage } : {}),
      ...(estimate.quota !== undefined ? { quota: estimate.quota } : {}),
      persisted,
    };
  }

  /**
   * For a worker: closes the database cleanly (every running phase ends first; the status turns "closed").
   * For a Durable Object reached by URL: the page leaves — its connection closes and the object goes on (an
   * object's harness lives as long as the object; it does not serve `close` to pages).
   */
  static {
    // `close` is a property of HostClient's prototype (derived from the protocol); this one wraps it.
    const closeHost = HostClient.prototype.close;
    Object.defineProperty(HarnessClient.prototype, "close", {
      value(this: HarnessClient): Promise<void> {
        pageClients().delete(this); // closed by the page: no longer one of its live clients
        if (!this.#socket) return closeHost.call(this);
        // Closed by the page, not gone: the status says so before the socket's end could say anything else.
        this.transportStatus({ kind: "closed", reason: "close" });
        this.terminate();
        return Promise.resolve();
      },
      writable: true,
      configurable: true,
    });
  }

  /**
   * Kills the worker at once (a crash, as far as the database is concerned); for a Durable Object, closes the
   * connection for good (the object goes on). Pending calls reject.
   */
  terminate(): void {
    this.worker?.terminate();
    this.#socket?.close();
    this.gone(this.worker ? "The database worker was terminated." : "The connection to the Durable Object was closed by the page.");
  }
}

/** The page's clients (of its worker, or of an object by URL), for pi-durable-web/testing (PAGE_TEST_HOOK). */
function pageClients(): Set<HarnessClient> {
  const scope = globalThis as { [PAGE_TEST_HOOK]?: Set<HarnessClient> };
  scope[PAGE_TEST_HOOK] ??= new Set();
  return scope[PAGE_TEST_HOOK];
}

/** The page's client: of a worker, or of a Durable Object host at `url` (ws:, wss:, http: or https:). */
export function connectHarness(target: Worker | string | URL): HarnessClient {
  return new HarnessClient(typeof target === "string" || target instanceof URL ? { url: String(target) } : target);
}
