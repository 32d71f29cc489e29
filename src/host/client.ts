/**
 * The page's handle on a host, over any transport (`pi-durable-web/client` builds it over a worker; a Durable
 * Object's client over a WebSocket). Its methods are the host's protocol (./protocol.ts), forwarded one for
 * one; subscriptions resolve with their unsubscribe function. It keeps the last status the host reported,
 * and once the transport says the host is gone (`gone()`), every pending and later call rejects with
 * `WorkerGone` instead of hanging.
 */

import type { ConversationViewState, ConversationViewUpdate } from "../agent/view/view.ts";
import { ConversationView } from "../agent/view/view-store.ts";
import { randomIds } from "../base/ids.ts";
import type { Json } from "../base/json.ts";
import { safely } from "../base/safely.ts";
import { DurableError, InvalidSetting, NotFound, WorkerGone } from "../errors.ts";
import type { Recovery } from "../harness.ts";
import { refuseUnsendable } from "../limits.ts";
import { type HostEndpoint, remoteHost } from "./endpoint.ts";
import { deserializeError } from "./error-wire.ts";
import { type PageToolImplementation, type ProvidePageToolsOptions, providePageTools } from "./page-tools.ts";
import { cancelPending, type PendingSubscription, pendingSubscription } from "./pending-subscription.ts";
import {
  type ClientAnswered,
  type ErrorShape,
  type HarnessStatus,
  type MethodName,
  PROTOCOL,
  type RemoteHost,
  type Unsubscribe,
} from "./protocol.ts";

/** The methods the client forwards as they are; it answers the others itself (`answeredByClient` in PROTOCOL). */
type Forwarded = Omit<RemoteHost, ClientAnswered>;

/** The longest page id a `HostClient` takes: a provision adds 9 characters, a claim id the call id and attempt (≤ 200). */
const MAX_PAGE_ID = 120;

// The forwarded methods are added to the class's prototype from PROTOCOL (see the static block).
export interface HostClient extends Forwarded {}

// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: the interface declares what the static block adds to the prototype
export class HostClient {
  /** The host itself, without the client's bookkeeping (for a transport's own calls such as `lifeLock`). */
  protected readonly remote: RemoteHost;
  #status: HarnessStatus = { kind: "starting" };
  /** The latest status the host itself reported (a transport's own may be shown over it for a while). */
  #hostStatus: HarnessStatus | undefined;
  /** The transport shows its own status until it says otherwise (a subscription not served yet; decision 0117). */
  #held = false;
  /** The status shown is a transport's `reconnecting` for a dropped connection (not a wait to be served again). */
  #shownDrop = false;
  /** A status subscription is asked or served (not ended by the host, not refused). */
  #statusWatched = false;
  readonly #statusListeners = new Set<(status: HarnessStatus) => void>();
  readonly #pending = new Set<(error: unknown) => void>();
  /** Status asks again under way (`statusAsked`): `ready()` waits for them before it settles on `failed`. */
  readonly #asking = new Set<Promise<void>>();
  #gone: WorkerGone | undefined;

  static {
    for (const name of Object.keys(PROTOCOL) as MethodName[]) {
      if (PROTOCOL[name].answeredByClient) continue;
      Object.defineProperty(HostClient.prototype, name, {
        value(this: HostClient, ...args: unknown[]) {
          return this.#track(async () => {
            refuseUnsendable(name, args);
            return (this.remote[name] as (...args: unknown[]) => Promise<unknown>)(...args);
          });
        },
        writable: true,
        configurable: true,
      });
    }
  }

  /**
   * This page load's id: the page tool calls it claims carry it (`providePageTools` adds a part per provision). At most
   * `MAX_PAGE_ID` (120) characters, so that the provision's part and a call id fit the wire's claim id; a longer one is
   * `InvalidSetting` here (decision 0152's review).
   */
  readonly pageId: string;

  constructor(endpoint: HostEndpoint, pageId = `page-${randomIds()}`) {
    if (pageId.length === 0 || pageId.length > MAX_PAGE_ID) {
      throw new InvalidSetting(`pageId must be 1 to ${MAX_PAGE_ID} characters (it is ${pageId.length})`);
    }
    this.remote = remoteHost(endpoint);
    this.pageId = pageId;
    this.#watchStatus();
  }

  /**
   * Subscribes to the host's status. Its end is told, never swallowed (decision 0117, later): refused when a reconnect
   * asked it again (decision 0114) or when first asked (a refusal; an answer that passes by itself such as
   * `AuthorizeFailed` is the transport's to ask again, its status `reconnecting` meanwhile: decision 0123), the page
   * hears `failed` with the host's error — also once the transport's own status is over
   * (no stale host status comes back; 0117's third review) — until the transport's next connection asks it again
   * (`watchStatusAgain`).
   */
  #watchStatus(): Promise<void> {
    if (this.#statusWatched || this.#gone) return Promise.resolve();
    this.#statusWatched = true;
    /** Resolved at the first answer: a status told, or the end (decision 0138: what `askAgain()` waits for). */
    let answered!: () => void;
    const first = new Promise<void>((resolve) => (answered = resolve));
    const ended = (error: Error) => {
      this.#statusWatched = false;
      answered();
      if (this.#gone) return;
      // Told each time it ends: a later connection that refuses it again comes after the transport's `reconnecting`, so
      // a second `failed` is never told twice in a row (the socket tells a refusal before its wait's `open`; 0117, review seams2).
      const failed: HarnessStatus = { kind: "failed", error: { name: error.name, message: error.message } };
      this.#hostStatus = failed;
      this.transportStatus(failed);
    };
    this.#track(() =>
      this.remote.onStatus((status: HarnessStatus) => {
        if (this.#gone) return; // the page decided: whatever arrives after is stale
        this.#hostStatus = status;
        if (!this.#held) this.#show(status); // else kept for hostStatusAgain (decision 0117's third review)
        answered();
      }, ended),
    ).catch((error: unknown) => ended(error instanceof Error ? error : new DurableError("The host's status could not be watched.")));
    return first;
  }

  /**
   * The transport opened a new connection: a status subscription the host ended (or never answered) is asked again
   * there, so the status is the host's again after a reconnect (decision 0117, later; before, a refused status
   * subscription left the page `reconnecting` for good after the next drop).
   */
  protected watchStatusAgain(): Promise<void> {
    return this.#watchStatus();
  }

  /**
   * The status asked again (`asked`: settled once each ask has its answer): resolves with the status then. Until then a
   * `ready()` does not settle on a `failed` shown — the refusal the ask may undo (decision 0138: `askAgain()` then
   * `ready()` rejected with the old refusal at once).
   */
  protected async statusAsked(asked: Promise<unknown>): Promise<HarnessStatus> {
    const settled = asked.then(
      () => {},
      () => {},
    );
    this.#asking.add(settled);
    try {
      await settled;
    } finally {
      this.#asking.delete(settled);
    }
    return this.#status;
  }

  /** The latest status the host reported. */
  get status(): HarnessStatus {
    return this.#status;
  }

  /**
   * A status the transport knows of before the host can say it (a dropped connection); the host's next wins — unless
   * `hold`: then it stays until `hostStatusAgain` (the open connection does not serve a subscription yet). `fresh`: a
   * wait that begins anew (the transport's last one ended), told as a drop's is, at whatever attempt (decision 0137).
   */
  protected transportStatus(status: HarnessStatus, hold = false, fresh = false): void {
    if (this.#gone) return;
    this.#held = hold;
    this.#show(status, (status.kind === "reconnecting" && !hold) || fresh);
  }

  /**
   * Shows `status` to the listeners — unless it is no change (decision 0123): the status shown, or a `reconnecting` that
   * continues the wait shown without going past its attempt — a wait to be served again (not a drop: `drop`) after such a
   * wait (a higher waiter served while a lower one failed told 3, then 2), or at the attempt of a drop's `reconnecting`
   * (the socket's drop told `reconnecting 1` and the carried subscription's `unserved` 1 told it again). A drop is always
   * told, and so is a lower wait after a drop: each is a new wait, with its own retry (decision 0123's review, L1: a drop
   * during a wait at attempt 3 was hidden, the page showing that wait's retry while the connection was down).
   */
  #show(status: HarnessStatus, drop = false): void {
    const shown = this.#status;
    if (status.kind === "reconnecting" && shown.kind === "reconnecting" && !drop) {
      const continues = this.#shownDrop ? status.attempt === shown.attempt : status.attempt <= shown.attempt;
      if (continues) return;
    }
    if (JSON.stringify(status) === JSON.stringify(shown)) return;
    this.#status = status;
    this.#shownDrop = drop;
    for (const listener of this.#statusListeners) safely(() => listener(status));
  }

  /** The transport's own status is over: the host's latest is the page's again. */
  protected hostStatusAgain(): void {
    this.#held = false;
    if (this.#hostStatus && this.#hostStatus !== this.#status) this.transportStatus(this.#hostStatus);
  }

  onStatus(listener: (status: HarnessStatus) => void): Unsubscribe {
    this.#statusListeners.add(listener);
    listener(this.#status);
    return () => void this.#statusListeners.delete(listener);
  }

  /**
   * Resolves once the database is open, with what that open recovered (how the last harness stopped, the
   * tasks a crash cut off); rejects if opening failed, the host is gone, or it was closed.
   */
  ready(): Promise<Recovery> {
    return new Promise((resolve, reject) => {
      // `onStatus` tells the status now: a client already ready settles before `unsubscribe` exists (it did throw then,
      // leaving the listener to throw again at the next status: `terminate()` after a second `ready()`).
      let settled = false;
      let unsubscribe: (() => void) | undefined;
      const check = (status: HarnessStatus) => {
        if (settled) return;
        // A refusal being asked again (`askAgain()`, decision 0138): settled by that ask's answer, not by the old one.
        if (status.kind === "failed" && this.#asking.size > 0 && !this.#gone) {
          void Promise.all(this.#asking).then(() => check(this.#status));
          return;
        }
        if (status.kind === "ready") resolve(status.recovery);
        else if (status.kind === "failed") reject(failure(status.error));
        else if (status.kind === "closed") reject(new DurableError(`The database was closed (${status.reason}).`));
        else return;
        settled = true;
        unsubscribe?.();
      };
      unsubscribe = this.onStatus(check);
      if (settled) unsubscribe();
      this.#pending.add(reject);
      if (this.#gone) reject(this.#gone);
    });
  }

  /**
   * The conversation view (entries, live run, tool slots, inbox, usage) now and after each commit, with
   * `streaming` text between commits (not durable yet). It holds the last 200 entries and what arrives
   * after them; `openConversation` also loads older ones. On a copy that follows, a conversation it has not received
   * yet is waited for (decision 0103); the promise's `cancel()` gives the wait up, or stops the watch once it started
   * (decision 0107: the host then holds nothing for it). `lost` is told once, with the host's typed error, if the host
   * refuses the watch when the transport asks it again (a reconnect, the database moving to another tab); the watch
   * has ended then (decision 0114).
   */
  watchConversation(
    conversationId: number,
    listener: (view: ConversationViewState) => void,
    lost?: (error: Error) => void,
  ): PendingSubscription {
    const opening = this.#open(conversationId);
    const watching = opening.then((view) => {
      view.subscribe(listener);
      if (lost) view.onLost(lost);
      return () => view.close();
    });
    return pendingSubscription(watching, opening.cancel);
  }

  /**
   * The page's copy of a conversation view: kept current by deltas, older entries loaded on demand. On a copy that
   * follows, a conversation it has not received yet is waited for (decision 0103); `cancel()` gives such a wait up
   * (the promise then rejects) and, once opened, closes the view — as `watchConversation(...).cancel()` does
   * (decisions 0107, 0111).
   */
  openConversation(conversationId: number): PendingSubscription<ConversationView> {
    return this.#open(conversationId);
  }

  #open(conversationId: number): PendingSubscription<ConversationView> {
    let watching: PendingSubscription | undefined;
    let cancelled = false;
    /** The watch's unsubscribe once the host answered it, called at most once (by `cancel()` or the view's close). */
    let unsubscribe: Unsubscribe | undefined;
    let stopped = false;
    const stop = () => {
      if (!unsubscribe || stopped) return;
      stopped = true;
      unsubscribe();
    };
    let view: ConversationView | undefined;
    let giveUp!: (error: unknown) => void;
    const givenUp = new Promise<never>((_, reject) => (giveUp = reject));
    const opening = ConversationView.open({
      watch: (listener, lost) => {
        watching = this.watchConversationUpdates(conversationId, listener, lost);
        if (cancelled) cancelPending(watching);
        return watching.then((answered) => {
          unsubscribe = answered;
          if (cancelled) stop();
          return stop;
        });
      },
      entriesBefore: (beforeId, limit) => this.conversationEntries(conversationId, beforeId, limit),
    });
    // Opened after it was given up (its snapshot was on its way when the page's cancel() went): closed at once.
    opening.then(
      (opened) => {
        view = opened;
        if (cancelled) opened.close();
      },
      () => {},
    );
    // The caller's promise settles when it is given up, even between the host's answer and the view's snapshot.
    const opened = this.#track(() => Promise.race([opening, givenUp]));
    return pendingSubscription(opened, () => {
      if (cancelled) return;
      cancelled = true;
      if (unsubscribe)
        stop(); // answered: the view's watch ends (a transport need not unsubscribe on a late cancel)
      else cancelPending(watching); // still waiting at the host: given up there (decision 0107)
      view?.close();
      giveUp(new NotFound(`Conversation ${conversationId} is no longer watched.`));
    });
  }

  /** The view's raw updates (snapshot, commit deltas, live frames), for a `ConversationViewStore` of your own. */
  watchConversationUpdates(
    conversationId: number,
    listener: (update: ConversationViewUpdate) => void,
    lost?: (error: Error) => void,
  ): PendingSubscription {
    let watching: Promise<Unsubscribe> | undefined;
    const tracked = this.#track(() => (watching = this.remote.watchConversation(conversationId, listener, lost)));
    return pendingSubscription(tracked, () => cancelPending(watching));
  }

  /**
   * Provides the page tools `tools` (implementations of tools the worker or object declared with
   * `definePageTool`) to conversation `conversationId` until the returned function is called (decision 0028):
   * a waiting call is claimed for this page — one commit, the first page wins — and only then run here; its
   * result is committed once. A reload or a closed tab while it runs follows the tool's replay policy.
   *
   *   const stop = await client.providePageTools(conversationId, {
   *     ask_person: async ({ question }) => prompt(String(question)) ?? "(no answer)",
   *   });
   */
  providePageTools(
    conversationId: number,
    tools: Readonly<Record<string, PageToolImplementation>>,
    options?: ProvidePageToolsOptions,
  ): Promise<Unsubscribe> {
    return this.#track(() => providePageTools(this, this.pageId, conversationId, tools, options));
  }

  /** Calls a method the app's worker added with `serveHarness({ methods })`. */
  call<T = unknown>(method: string, ...args: Json[]): Promise<T> {
    return this.#track(async () => {
      refuseUnsendable(method, args);
      return this.remote.call(method, ...args) as Promise<T>;
    });
  }

  /** The transport tells that the host is gone: pending and later calls reject with `WorkerGone(message)`. */
  protected gone(message: string): void {
    if (this.#gone) return;
    this.#gone = new WorkerGone(message);
    for (const reject of this.#pending) reject(this.#gone);
    this.#pending.clear();
    // The page hears of it like any other status change. A worker the page closed stays "closed"; one closed by a
    // takeover did not end for good until now (its host may have opened again), so its page is told (0150's review, L1).
    if (!(this.#status.kind === "closed" && this.#status.reason === "close")) {
      this.#status = { kind: "failed", error: { name: this.#gone.name, message } };
      for (const listener of this.#statusListeners) safely(() => listener(this.#status));
    }
  }

  /** Starts a call unless the host is gone; it rejects with `WorkerGone` when the host goes before it answers. */
  #track<T>(start: () => Promise<T>): Promise<T> {
    if (this.#gone) return Promise.reject(this.#gone);
    return new Promise<T>((resolve, reject) => {
      this.#pending.add(reject);
      start().then(
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
  return error instanceof DurableError ? error : Object.assign(new DurableError(error.message), { name: error.name }); // text, as deserializeError made them
}
