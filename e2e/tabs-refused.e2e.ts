import { describe, expect, it } from "vitest";
import type { HarnessClient } from "../src/browser/client.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import "./app/host-api.ts";
import { browserPerTest } from "./support/browser";

// Decision 0132 in Chromium: two tabs of the e2e page on one database (e2e/app/harness-worker.ts with `tabHook`: the
// leader worker's authorize hook answers the other tab's status subscription as the page says). Refused, the follower
// shows `failed` with the library's NotAuthorized; the hook throwing, `reconnecting` with AuthorizeFailed; once the hook
// lets it (and the app calls `askAgain()`), the follower follows — without a reload or a new leader (before: `failed`
// until another tab led).

const session = browserPerTest();

declare global {
  interface Window {
    client: HarnessClient;
    told: string[];
  }
}

describe("a follower tab the leader's authorize hook refuses", () => {
  it("shows failed (NotAuthorized), then reconnecting while the hook throws, and follows once the hook lets it", async () => {
    const leader = await session.newPage();
    await leader.evaluate(async () => {
      window.client = window.hostE2e.connect({ tabHook: true });
      await window.client.ready();
      await window.client.call("tabAnswer", "refuse");
    });
    expect(await leader.evaluate(() => window.client.role)).toBe("leader");

    const follower = await session.newPage();
    const refused = await follower.evaluate(async () => {
      window.client = window.hostE2e.connect({ tabHook: true });
      window.told = [];
      const shown = (status: HarnessStatus) =>
        status.kind === "failed" || (status.kind === "reconnecting" && status.error)
          ? `${status.kind} ${status.error!.name}`
          : status.kind === "ready"
            ? `ready ${status.role}`
            : status.kind;
      window.client.onStatus((status) => void window.told.push(shown(status)));
      const error = await window.client.ready().then(
        () => undefined,
        (error: Error) => ({ name: error.name, message: error.message }),
      );
      return { error, status: window.client.status };
    });
    expect(refused.error).toMatchObject({ name: "NotAuthorized" });
    expect(refused.error?.message).toContain("its authorize hook refused this caller");
    expect(refused.status).toMatchObject({ kind: "failed", error: { name: "NotAuthorized" } });

    // The hook now fails (an outage of the app's permission store): at the refused backoff's next ask (5 s) the
    // follower waits on it, `reconnecting` with the library's AuthorizeFailed, never the hook's words.
    await leader.evaluate(() => window.client.call("tabAnswer", "throw"));
    await follower.waitForFunction(() => window.client.status.kind === "reconnecting", undefined, { timeout: 20_000 });
    const waiting = await follower.evaluate(() => window.client.status);
    expect(waiting).toMatchObject({ kind: "reconnecting", error: { name: "AuthorizeFailed" } });
    expect(JSON.stringify(waiting)).not.toContain("permission store");

    // The app lets it (a sign-in) and says so (`askAgain`: asked now, not at the wait's end): the follower follows, and
    // its calls reach the leader's database.
    await leader.evaluate(() => window.client.call("tabAnswer", "allow"));
    await follower.evaluate(() => window.client.askAgain());
    await follower.waitForFunction(() => window.client.role === "follower", undefined, { timeout: 20_000 });
    const conversation = await leader.evaluate(() => window.client.createConversation());
    const seen = await follower.evaluate(async () => (await window.client.listConversations()).map((one) => one.id));
    expect(seen).toContain(conversation);
    const told = await follower.evaluate(() => window.told);
    expect(told.filter((one) => one === "failed NotAuthorized")).toHaveLength(1); // told once
    expect(told.indexOf("failed NotAuthorized")).toBeLessThan(told.indexOf("reconnecting AuthorizeFailed"));
    expect(told.at(-1)).toBe("ready follower");
  }, 90_000);
});
