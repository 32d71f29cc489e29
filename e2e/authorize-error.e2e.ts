import { describe, expect, it } from "vitest";
import type { HarnessClient } from "../src/browser/client.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import "./app/host-api.ts";
import { browserPerTest } from "./support/browser";
import { harnessWorkerOf } from "./support/harness-worker";

// Decisions 0117 (later) and 0123 in Chromium: two tabs of the e2e page on one database; the leader's worker's authorize
// hook throws for the other tab's status subscription (an outage of the app's permission store). The leader's
// `onAuthorizeError` hears the hook's own error each time, with the caller (`{ from: "tab" }`), the action and the
// door; the follower sees none of it — its status is `reconnecting` with the library's typed AuthorizeFailed, it asks
// again on the backoff by itself, and once the hook stops throwing it follows (no `askAgain`, no reload): what both
// tabs stored before and during the outage is there.

const session = browserPerTest();

declare global {
  interface Window {
    client: HarnessClient;
    told: string[];
    during: Promise<number>;
  }
}

describe("the leader tab's authorize hook throws for a follower's status (onAuthorizeError, decisions 0117 and 0123)", () => {
  it("the leader's onAuthorizeError hears the hook's own error; the follower shows reconnecting AuthorizeFailed, asks again by itself and follows once the hook stops throwing, nothing stored lost", async () => {
    const leader = await session.newPage();
    const before = await leader.evaluate(async () => {
      window.client = window.hostE2e.connect({ tabHook: true });
      await window.client.ready();
      await window.client.call("tabAnswer", "throw");
      return window.client.createConversation();
    });
    expect(await leader.evaluate(() => window.client.role)).toBe("leader");
    const leaderWorker = await harnessWorkerOf(leader);

    const follower = await session.newPage();
    await follower.evaluate(() => {
      window.client = window.hostE2e.connect({ tabHook: true });
      window.told = [];
      window.client.onStatus((status: HarnessStatus) => {
        const error = status.kind === "failed" || status.kind === "reconnecting" ? status.error : undefined;
        window.told.push(
          status.kind === "ready"
            ? `ready ${status.role}`
            : `${status.kind}${status.kind === "reconnecting" ? ` ${status.attempt}` : ""}${error ? ` ${error.name}` : ""}`,
        );
      });
    });
    // The follower waits on the leader's door, asked again on the backoff (500 ms, doubling): attempt 2 is a second ask.
    await follower.waitForFunction(() => window.told.includes("reconnecting 2 AuthorizeFailed"), undefined, { timeout: 30_000 });
    const waiting = await follower.evaluate(() => window.client.status);
    expect(waiting).toMatchObject({ kind: "reconnecting", error: { name: "AuthorizeFailed" } });
    expect(JSON.stringify(waiting), "none of the hook's words on the follower").not.toContain("permission store");

    // The leader's app heard every failed ask: the hook's own error, the caller, the action and the door.
    const heard = await leaderWorker.evaluate(() => [...globalThis.e2eAuthorizeErrors]);
    expect(heard.length).toBeGreaterThanOrEqual(2);
    for (const one of heard)
      expect(one).toEqual({ name: "Error", message: "the e2e permission store is down", from: "tab", action: "onStatus", door: "host" });

    // Meanwhile both tabs store: the leader at once, the follower's call waits for a place that is ready to take it.
    const leaderDuring = await leader.evaluate(() => window.client.createConversation());
    await follower.evaluate(() => {
      window.during = window.client.createConversation();
    });

    // The outage passes (no askAgain): the follower's next ask is served and it follows the leader.
    await leader.evaluate(() => window.client.call("tabAnswer", "allow"));
    await follower.waitForFunction(() => window.client.role === "follower", undefined, { timeout: 30_000 });
    const followerDuring = await follower.evaluate(() => window.during);
    const expected = [before, leaderDuring, followerDuring];
    const inFollower = await follower.evaluate(async () => (await window.client.listConversations()).map((one) => one.id));
    const inLeader = await leader.evaluate(async () => (await window.client.listConversations()).map((one) => one.id));
    expect(inFollower).toEqual(expect.arrayContaining(expected));
    expect(inLeader).toEqual(expect.arrayContaining(expected));

    const told = await follower.evaluate(() => window.told);
    expect(
      told.filter((line) => line.startsWith("failed")),
      told.join(" | "),
    ).toEqual([]);
    const attempts = told.filter((line) => line.startsWith("reconnecting")).map((line) => Number(line.split(" ")[1]));
    expect(attempts, `the attempt told never goes down: ${told.join(" | ")}`).toEqual([...attempts].sort((a, b) => a - b));
    expect(told.at(-1)).toBe("ready follower");
    // The app was told each failed ask the follower waited on, and not the one that served it.
    const heardAtEnd = await leaderWorker.evaluate(() => globalThis.e2eAuthorizeErrors.length);
    expect(heardAtEnd, told.join(" | ")).toBe(told.filter((line) => line.endsWith(" AuthorizeFailed")).length);
  }, 90_000);
});
