import type { HarnessClient } from "../../src/browser/client.ts";
import type * as errors from "../../src/errors.ts";

// The library's client and error classes on the e2e page (e2e/app/host-page.ts), for e2e/host.e2e.ts:
// `instanceof` is checked against the classes the page itself bundles.
export interface HostE2e {
  /** `tabHook`: the worker's authorize hook answers another tab's `onStatus` as its `tabAnswer` method says. */
  connect(options?: { crashPoints?: boolean; tabHook?: boolean }): HarnessClient;
  errors: typeof errors;
  /** A client of the page-tools worker (ask_unsafe, ask_safe declared there; e2e/page-tools.e2e.ts). */
  connectPageTools(): HarnessClient;
}

declare global {
  interface Window {
    hostE2e: HostE2e;
  }
}
