import { describe, expect, it } from "vitest";
import type { HarnessClient } from "../src/browser/client.ts";
import "./app/host-api.ts";
import { browserPerTest } from "./support/browser";

// Decision 0141 in Chromium: a page of the origin that forges a `leader` announcement (and holds a mark lock for its
// forged id in its own client) does not take a follower tab away from its leader. Web Locks' `query()` names the
// client that holds the database's lock and the real leader's mark: one worker.

const session = browserPerTest();

declare global {
  interface Window {
    client: HarnessClient;
    forgedConnects: number;
  }
}

describe("a forged leader announcement", () => {
  it("is ignored by a follower tab: the leader worker holds the database lock and its mark, the forger's mark is in another client; no connect to the forged id, calls answered", async () => {
    const leader = await session.newPage();
    await leader.evaluate(async () => {
      window.client = window.hostE2e.connect({});
      await window.client.ready();
    });
    expect(await leader.evaluate(() => window.client.role)).toBe("leader");
    const follower = await session.newPage();
    const database = await follower.evaluate(async () => {
      window.client = window.hostE2e.connect({});
      await window.client.ready();
      const status = window.client.status;
      return status.kind === "ready" ? status.database : "";
    });
    expect(await follower.evaluate(() => window.client.role)).toBe("follower");

    const forger = await session.newPage();
    const held = await forger.evaluate(async (database) => {
      const forged = `pi-durable-web:tabs:${database}:leader:forged-id`;
      await new Promise<void>(
        (granted) =>
          void navigator.locks.request(forged, () => {
            granted();
            return new Promise(() => {});
          }),
      );
      const channel = new BroadcastChannel(`pi-durable-web:tabs:${database}`);
      window.forgedConnects = 0;
      channel.onmessage = ({ data }) => {
        if (data?.type === "connect" && data.leader === "forged-id") window.forgedConnects++;
        if (data?.type === "who-leads") channel.postMessage({ type: "leader", leader: "forged-id" });
      };
      for (let i = 0; i < 5; i++) {
        channel.postMessage({ type: "leader", leader: "forged-id" });
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
      return (await navigator.locks.query()).held ?? [];
    }, database);
    const holder = held.find((lock) => lock.name === `pi-durable-web:${database}`)?.clientId;
    const marks = held.filter((lock) => lock.name?.startsWith(`pi-durable-web:tabs:${database}:leader:`));
    expect(holder).toBeTruthy();
    expect(marks.filter((lock) => lock.clientId === holder)).toHaveLength(1); // the leader's, in its worker
    expect(marks.find((lock) => lock.name?.endsWith(":forged-id"))?.clientId).not.toBe(holder);

    expect(await forger.evaluate(() => window.forgedConnects)).toBe(0);
    expect(await follower.evaluate(() => window.client.role)).toBe("follower");
    const conversation = await leader.evaluate(() => window.client.createConversation());
    const seen = await follower.evaluate(async () => (await window.client.listConversations()).map((one) => one.id));
    expect(seen).toContain(conversation);
  }, 60_000);
});
