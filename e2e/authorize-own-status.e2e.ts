import type { Page, Worker } from "playwright-core";
import { describe, expect, it } from "vitest";
import type { HarnessClient } from "../src/browser/client.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import "./app/host-api.ts";
import { browserPerTest } from "./support/browser";
import { harnessWorkerOf } from "./support/harness-worker";

// Decisions 0123 and 0132 in Chromium: the page's OWN worker's authorize hook fails the page's status subscription.
// What the page's `onStatus` sees: a hook that throws is an outage that passes by itself — `reconnecting` with the
// library's AuthorizeFailed (never the hook's words), asked again on the backoff, never `failed`; a hook that answers
// `false` is the app's answer — `failed` with NotAuthorized while that worker lives (0132: this page's own hook), and
// `ready()` rejects. Either way, once the hook lets it, `client.askAgain()` asks now and the page is `ready` on the same
// worker, with what was stored meanwhile (a call the door let through) all there. The worker's `onAuthorizeError` is
// told each throw with the hook's own error, and never a refusal.

const session = browserPerTest();

declare global {
  interface Window {
    client: HarnessClient;
    told: string[];
    /** Each status told, when (`Date.now()`, as the worker's `e2ePageAsks`) and, reconnecting, when its backoff asks again. */
    timed: Array<{ kind: string; at: number; retryInMs?: number }>;
    during: Promise<number>;
  }
}

/** Connects the e2e worker with its hook answering this page's `onStatus` as `answer`, recording what `onStatus` tells. */
function connectTold(answer: "refuse" | "throw"): void {
  window.client = window.hostE2e.connect({ pageHook: answer });
  window.told = [];
  window.timed = [];
  window.client.onStatus((status: HarnessStatus) => {
    const retryInMs = status.kind === "reconnecting" ? status.retryInMs : undefined;
    window.timed.push({ kind: status.kind, at: Date.now(), ...(retryInMs !== undefined && { retryInMs }) });
    const error = status.kind === "failed" || status.kind === "reconnecting" ? status.error : undefined;
    window.told.push(
      status.kind === "reconnecting"
        ? `reconnecting ${status.attempt}${error ? ` ${error.name}: ${error.message}` : ""}`
        : error
          ? `${status.kind} ${error.name}: ${error.message}`
          : status.kind,
    );
  });
}

/**
 * Once the page's status shows a backoff of 4 s or more (told after the `from`th status; the test's own steps fit in
 * it): when its own ask is due. `askAgain()` then must ask the hook before that (`askAgainBefore`). Before (the review
 * of 0136, M2), waits longer than the backoff passed with `askAgain` doing nothing. (A status told after `askAgain` is
 * no sign: its wait starts over at attempt 1, which the page does not show below the attempt it showed.)
 */
async function longBackoff(page: Page, from: number): Promise<{ due: number; retryInMs: number }> {
  await page.waitForFunction((from) => window.timed.slice(from).some((one) => (one.retryInMs ?? 0) >= 4_000), from, {
    timeout: 30_000,
  });
  const wait = await page.evaluate(() => window.timed.at(-1)!);
  expect(wait, "the page waits on its backoff").toMatchObject({ kind: "reconnecting" });
  return { due: wait.at + wait.retryInMs!, retryInMs: wait.retryInMs! };
}

/** `askAgain()`: the hook is asked before `due`, when the backoff's own ask was, by a second. */
async function askAgainBefore(page: Page, worker: Worker, { due, retryInMs }: { due: number; retryInMs: number }): Promise<void> {
  const asked = await worker.evaluate(() => globalThis.e2ePageAsks.length);
  const at = await page.evaluate(() => {
    const at = Date.now();
    void window.client.askAgain();
    return at;
  });
  // A second short of it: the backoff's own ask is timed from before the page heard of its wait (a no-op askAgain failed
  // this by 4 ms only: that ask came 4 s after `at` was taken).
  const before = due - 1_000;
  expect(at, "askAgain called a second before the backoff's own ask is due").toBeLessThan(before);
  await expect.poll(() => worker.evaluate(() => globalThis.e2ePageAsks.length), { timeout: 30_000 }).toBeGreaterThan(asked);
  const next = await worker.evaluate((asked) => globalThis.e2ePageAsks[asked]!, asked);
  expect(next, `the hook asked a second before the backoff's own ask (${retryInMs} ms after the wait was told)`).toBeLessThan(before);
}

describe("the page's own worker's authorize hook fails the page's status subscription (decisions 0123, 0132)", () => {
  it("a hook that throws: onStatus shows reconnecting with AuthorizeFailed at growing attempts, never failed; onAuthorizeError hears the hook's own error; askAgain once it lets it: ready, the call made meanwhile answered and stored", async () => {
    const page = await session.newPage();
    await page.evaluate(connectTold, "throw" as const);
    const worker = await harnessWorkerOf(page);
    // Asked again on the backoff (500 ms, doubling): the page's attempt grows while the hook throws.
    await page.waitForFunction(() => window.told.some((line) => line.startsWith("reconnecting 2 ")), undefined, { timeout: 20_000 });
    const waiting = await page.evaluate(() => window.client.status);
    expect(waiting).toMatchObject({ kind: "reconnecting", error: { name: "AuthorizeFailed" } });
    expect(JSON.stringify(waiting)).not.toContain("permission store");

    // A call made meanwhile goes to the worker's door, which lets it (decision 0138; before, it waited for the status).
    await page.evaluate(() => {
      window.during = window.client.createConversation();
    });
    // The worker's `onAuthorizeError` heard each failed ask, with the hook's own error and where it failed.
    const heard = await worker.evaluate(() => [...globalThis.e2eAuthorizeErrors]);
    expect(heard.length).toBeGreaterThanOrEqual(2);
    for (const one of heard)
      expect(one).toEqual({ name: "Error", message: "the e2e permission store is down", from: "page", action: "onStatus", door: "host" });

    // askAgain while the hook still throws asks at once (one more failure told), and the page keeps waiting.
    const before = await worker.evaluate(() => globalThis.e2eAuthorizeErrors.length);
    await askAgainBefore(page, worker, await longBackoff(page, 0));
    await expect.poll(() => worker.evaluate(() => globalThis.e2eAuthorizeErrors.length)).toBeGreaterThan(before);
    const shown = await page.evaluate(() => window.timed.length);
    expect(await page.evaluate(() => window.client.status.kind)).toBe("reconnecting");

    // The outage passes and the app says so: ready on the same worker, the call made meanwhile answered and stored.
    const wait = await longBackoff(page, shown);
    await worker.evaluate(() => globalThis.e2ePageAnswer("allow"));
    // `askAgain()` asks before the backoff would; then `ready()` settles by the new answer (decision 0138; a timer's ask
    // under way may answer first: `ready()` waits through its `reconnecting`).
    await askAgainBefore(page, worker, wait);
    await page.evaluate(() => window.client.ready());
    const during = await page.evaluate(() => window.during);
    const listed = await page.evaluate(async () => (await window.client.listConversations()).map((one) => one.id));
    expect(listed).toContain(during);
    const told = await page.evaluate(() => window.told);
    expect(
      told.filter((line) => line.startsWith("failed")),
      told.join(" | "),
    ).toEqual([]);
    const reconnecting = told.filter((line) => line.startsWith("reconnecting"));
    expect(
      reconnecting.every((line) => / AuthorizeFailed: /.test(line) && !line.includes("permission store")),
      told.join(" | "),
    ).toBe(true);
    const attempts = reconnecting.map((line) => Number(line.split(" ")[1]));
    expect(attempts, "the attempt told never goes down").toEqual([...attempts].sort((a, b) => a - b));
    expect(told.at(-1)).toBe("ready");
  }, 90_000);

  it("a hook that refuses: onStatus shows failed with NotAuthorized (told once, ready() rejects) while the hook refuses, onAuthorizeError hears nothing; askAgain once it lets it: ready, nothing stored lost", async () => {
    const page = await session.newPage();
    await page.evaluate(connectTold, "refuse" as const);
    const worker = await harnessWorkerOf(page);
    const refused = await page.evaluate(async () => {
      const error = await window.client.ready().then(
        () => undefined,
        (error: Error) => ({ name: error.name, message: error.message, typed: error instanceof window.hostE2e.errors.NotAuthorized }),
      );
      return { error, status: window.client.status };
    });
    expect(refused.error).toMatchObject({ name: "NotAuthorized", typed: true });
    expect(refused.error?.message).toContain("its authorize hook refused this caller");
    expect(refused.status).toMatchObject({ kind: "failed", error: { name: "NotAuthorized" } });

    // Refused, the page's calls still go to its worker (whose door lets them through): what it stores is stored. The
    // page cannot see when its worker is open — its status is refused — and need not: a call made while the worker
    // still opens waits for the open (decision 0138; before, "The database is not open (status: starting)").
    const during = await page.evaluate(() => window.client.createConversation());
    // Still refused, askAgain asks and is refused again: it resolves failed, told once; the hook was asked (the review
    // of 0136, L2: before 0138 the switch below raced the re-ask).
    const asked = await worker.evaluate(() => globalThis.e2ePageAsks.length);
    expect(await page.evaluate(async () => (await window.client.askAgain()).kind)).toBe("failed");
    expect(await worker.evaluate(() => globalThis.e2ePageAsks.length)).toBeGreaterThan(asked);

    // The app lets it (a sign-in) and says so: ready on the same worker, with what was stored meanwhile.
    await worker.evaluate(() => globalThis.e2ePageAnswer("allow"));
    // `askAgain()` then `ready()` at once settles by the new answer (decision 0138; before, the old refusal).
    const again = await page.evaluate(async () => {
      const asked = window.client.askAgain();
      await window.client.ready();
      return (await asked).kind;
    });
    expect(again).toBe("ready");
    const listed = await page.evaluate(async () => (await window.client.listConversations()).map((one) => one.id));
    expect(listed).toContain(during);
    expect(await worker.evaluate(() => globalThis.e2eAuthorizeErrors)).toEqual([]); // a refusal is no failure of the hook
    const told = await page.evaluate(() => window.told);
    expect(
      told.filter((line) => line.startsWith("failed")),
      told.join(" | "),
    ).toEqual([
      `failed NotAuthorized: The host refused "onStatus" for this caller: its authorize hook refused this caller. Nothing was done.`,
    ]);
    expect(told.at(-1), told.join(" | ")).toBe("ready");
  }, 90_000);
});
