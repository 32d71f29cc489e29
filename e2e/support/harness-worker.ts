import type { Page, Worker } from "playwright-core";
import { expect } from "vitest";
import type { E2eWorkerScope } from "../app/host-api.ts";

// The e2e worker's globals (e2e/app/harness-worker.ts), for the functions a test evaluates inside it.
declare global {
  var e2eAuthorizeErrors: E2eWorkerScope["e2eAuthorizeErrors"];
  var e2ePageAnswer: E2eWorkerScope["e2ePageAnswer"];
  var e2ePageAsks: E2eWorkerScope["e2ePageAsks"];
  var e2eFollowSockets: E2eWorkerScope["e2eFollowSockets"];
  var e2eHarness: E2eWorkerScope["e2eHarness"];
}

/** The e2e page's harness worker (e2e/app/harness-worker.ts), once the page started it. */
export async function harnessWorkerOf(page: Page): Promise<Worker> {
  const find = () => page.workers().find((worker) => worker.url().includes("harness-worker"));
  await expect.poll(() => find() !== undefined, { timeout: 10_000, message: "the page's harness worker" }).toBe(true);
  return find()!;
}
