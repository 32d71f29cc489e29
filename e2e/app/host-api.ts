import type { HarnessClient } from "../../src/browser/client.ts";
import type * as errors from "../../src/errors.ts";

/** How the e2e worker's authorize hook answers a status subscription: let it, refuse it, or throw (an outage). */
export type HookAnswer = "allow" | "refuse" | "throw";

/** What the e2e worker's `onAuthorizeError` was told: the hook's own error, and the caller, action and door. */
export interface ToldAuthorizeError {
  name: string;
  message: string;
  from: string;
  action: string;
  door: string;
}

/** The e2e worker's options (its name, as JSON). */
export interface WorkerOptions {
  crashPoints?: boolean;
  /** The worker's authorize hook answers another tab's `onStatus` as its `tabAnswer` method says. */
  tabHook?: boolean;
  /** The worker's authorize hook answers its own page's `onStatus` like this, until its `pageAnswer` method says otherwise. */
  pageHook?: HookAnswer;
  /** The worker's authorize hook refuses its own page these methods too (other tabs are let by: decision 0144's e2e). */
  pageRefuses?: string[];
  /** Follows the Durable Object whose follow link is this URL (`serveHarness({ follow })`). */
  follow?: string;
}

/** A socket of the e2e worker's follow link, and its close event once it came. */
export interface FollowSocket {
  readonly socket: WebSocket;
  closed?: { code: number; wasClean: boolean };
}

/** What the e2e worker keeps on its global scope for the test (through Playwright's worker handle). */
export interface E2eWorkerScope {
  /** What `onAuthorizeError` was told, in order. */
  e2eAuthorizeErrors: ToldAuthorizeError[];
  /** When (`Date.now()`) the hook was asked for the worker's own page's `onStatus`, each time. */
  e2ePageAsks: number[];
  /** How the hook answers the worker's own page's `onStatus` from now on (with `pageHook`). */
  e2ePageAnswer(answer: HookAnswer): void;
  /** With `follow`: every socket the follow link opened, in order (a reconnect is a new one). */
  e2eFollowSockets: FollowSocket[];
  /** The harness once open (its `closed` says when a close is past the harness). */
  e2eHarness?: { readonly closed: boolean };
}

// The library's client and error classes on the e2e page (e2e/app/host-page.ts), for e2e/host.e2e.ts:
// `instanceof` is checked against the classes the page itself bundles.
export interface HostE2e {
  connect(options?: WorkerOptions): HarnessClient;
  /** A client of the Durable Object at `url` (`connectHarness(url)`). */
  connectUrl(url: string): HarnessClient;
  errors: typeof errors;
  /** A client of the page-tools worker (ask_unsafe, ask_safe declared there; e2e/page-tools.e2e.ts). */
  connectPageTools(): HarnessClient;
}

declare global {
  interface Window {
    hostE2e: HostE2e;
  }
}
