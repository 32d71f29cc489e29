import { describe, expect, it } from "vitest";
import type { HarnessClient } from "../src/browser/client.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import "./app/host-api.ts";
import { browserPerTest } from "./support/browser";
import { edgePerTest } from "./support/edge";

// Decisions 0117 (later) and 0123 in Chromium + workerd: a page connected to a Durable Object by URL, whose authorize
// hook throws for the page's status subscription (an outage of the app's permission store; e2e/edge/worker.ts's
// `DoorsObject`). The object's `onAuthorizeError` hears the hook's own error each time; the page sees none of it — its
// status is `reconnecting` with the library's typed AuthorizeFailed at its very first ask (0123: before, `failed` until
// the next connection), asked again on the same connection by itself, and `ready` once the hook stops throwing: what the
// page stored meanwhile is there.

const session = browserPerTest();
const edge = edgePerTest();

declare global {
  interface Window {
    client: HarnessClient;
    told: string[];
    during: Promise<number>;
  }
}

/** Object `name`'s e2e route (`/hook`, `/authorize-errors`). */
const routeOf = (name: string, route: string) => `${edge.socketUrl(name).replace(/^ws:/, "http:")}/${route}`;
/** What object `name`'s `onAuthorizeError` was told so far. */
const toldAtObject = async (name: string) =>
  (await (await fetch(routeOf(name, "authorize-errors"))).json()) as Array<Record<string, string>>;
/** How object `name`'s hook answers the pages' status subscriptions from now on. */
const hookAnswers = async (name: string, answer: "allow" | "refuse" | "throw") => {
  const response = await fetch(`${routeOf(name, "hook")}?answer=${answer}`, { method: "POST" });
  expect(response.ok).toBe(true);
};

describe("a Durable Object's authorize hook throws for a page's status (onAuthorizeError, decisions 0117 and 0123)", () => {
  it("the object's onAuthorizeError hears the hook's own error; the page shows reconnecting AuthorizeFailed from its first ask, asks again on the same connection and is ready once the hook stops throwing, nothing stored lost", async () => {
    const name = "doors-status";
    await hookAnswers(name, "throw");
    const page = await session.newPage();
    await page.evaluate((url) => {
      window.client = window.hostE2e.connectUrl(url);
      window.told = [];
      window.client.onStatus((status: HarnessStatus) => {
        const error = status.kind === "failed" || status.kind === "reconnecting" ? status.error : undefined;
        window.told.push(`${status.kind}${status.kind === "reconnecting" ? ` ${status.attempt}` : ""}${error ? ` ${error.name}` : ""}`);
      });
    }, edge.socketUrl(name));
    await page.waitForFunction(() => window.told.includes("reconnecting 2 AuthorizeFailed"), undefined, { timeout: 30_000 });
    const waiting = await page.evaluate(() => window.client.status);
    expect(waiting).toMatchObject({ kind: "reconnecting", error: { name: "AuthorizeFailed" } });
    expect(JSON.stringify(waiting), "none of the hook's words on the page").not.toContain("permission store");

    // The object's app heard every failed ask: the hook's own error, the action and the door.
    const heard = await toldAtObject(name);
    expect(heard.length).toBeGreaterThanOrEqual(2);
    for (const one of heard)
      expect(one).toMatchObject({ name: "Error", message: "the e2e permission store is down", action: "onStatus", door: "host" });

    // The page stores meanwhile (its other calls pass the door).
    await page.evaluate(() => {
      window.during = window.client.createConversation();
    });
    // The outage passes (no askAgain, no reconnect): the page's next ask is served on the same connection.
    await hookAnswers(name, "allow");
    await page.waitForFunction(() => window.client.status.kind === "ready", undefined, { timeout: 30_000 });
    const during = await page.evaluate(() => window.during);
    expect(await page.evaluate(async () => (await window.client.listConversations()).map((one) => one.id))).toContain(during);

    const told = await page.evaluate(() => window.told);
    expect(
      told.filter((line) => line.startsWith("failed")),
      told.join(" | "),
    ).toEqual([]);
    const attempts = told.filter((line) => line.startsWith("reconnecting")).map((line) => Number(line.split(" ")[1]));
    expect(attempts, `the attempt told never goes down: ${told.join(" | ")}`).toEqual([...attempts].sort((a, b) => a - b));
    expect(told.at(-1)).toBe("ready");
    // (No check that the app is told nothing more once served: with the hook allowing, `onAuthorizeError` cannot be
    // called whatever the page does — it could not fail; the review of 0136, L1.)
  }, 90_000);
});
