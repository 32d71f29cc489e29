import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { COPY } from "../../src/follow/copy-writes.ts";
import { encodeFollowMessage } from "../../src/follow/wire.ts";
import { createRegistry } from "../../src/index.ts";
import { openSqliteStorage } from "../../src/storage/sqlite/open-storage.ts";
import { followSocket, until } from "./follow-support.ts";
import { handOverIdle, holdUntilLapsed, instanceOf, objectState, openTabLink } from "./lapse-support.ts";
import { type Edge, startEdge } from "./support.ts";

// Decision 0143 in workerd: a page connected to the object itself (`POST /rpc` as caller alice) presses Send while the
// object's instance whose idle 3 s lease lapsed (decision 0052) still lives — its alarm held here so that the window
// stays open (on Cloudflare the alarm ends the instance at once; here it can stay when no event ends it). Before: 400
// `LeaseNotHeld`, with advice for the harness's owner ("take the lease again or open read-only"), final. Now: 503
// `NotReady` with Retry-After; sent again under the same requestId once the next instance took the lease again, the
// write is made once.

describe("a page's Send to an object whose idle lease lapsed (decision 0143)", { timeout: 90_000 }, () => {
  let edge: Edge;
  beforeAll(async () => {
    edge = await startEdge();
  }, 120_000);
  afterAll(async () => {
    await edge?.dispose();
  });

  it("S8/S12: POST /rpc submit in the lapse is 503 NotReady (no owner advice), a device's copy.submit NotReady; the same requestId on the next instance is made once", async () => {
    const name = "lapse-page"; // a 3 s lease
    const rpc = (method: string, args: unknown[]) =>
      edge.call("follow", name, "/rpc", {
        method: "POST",
        headers: { "x-caller": "alice", "content-type": "application/json" },
        body: JSON.stringify({ method, args }),
      });
    const state = () => objectState(edge, name);
    const value = async <T>(response: Response): Promise<T> => ((await response.json()) as { value: T }).value;
    // A tab hands the lease over to the object (decision 0038) with nothing running: the object holds it, idle.
    const { link, socket } = await openTabLink(edge, name);
    const storage = await openSqliteStorage({ vfs: "memory" });
    const conversationId = await handOverIdle(storage, createRegistry(), link);
    socket.stop();
    await until("the object holds the lease", async () => (await state()).holding);
    const held = await state();
    expect(held).toMatchObject({ holding: true, lease: { holder: "object" } });
    // Idle from here: no event renews the lease (its renewal is parked), and the alarm that would end the instance
    // does nothing on this one.
    const instance = await instanceOf(edge, name);
    await holdUntilLapsed(edge, name);
    const note = { type: "write", entry: { kind: "app.note" }, requestId: "lapse-1" };
    const refused = await rpc("submit", [conversationId, note]);
    const body = (await refused.json()) as { error?: { name: string; message: string } };
    // Before: 400 LeaseNotHeld ("object does not hold the lease (its lease of epoch N expired …) … take the lease again
    // or open read-only").
    expect({ status: refused.status, name: body.error?.name }).toEqual({ status: 503, name: "NotReady" });
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(body.error?.message).not.toMatch(/read-only|take the lease/);
    // The same instance answered: the one whose lease lapsed.
    expect(await instanceOf(edge, name)).toBe(instance);
    // Asked again in the window (the host reopened read-only meanwhile), still NotReady.
    const again = await rpc("submit", [conversationId, note]);
    expect(((await again.json()) as { error?: { name: string } }).error?.name).toBe("NotReady");
    // A following device's keyed write on the follow link (topic copy, decisions 0096, 0135) in the window: NotReady too
    // (its link sends it again under its key), no longer LeaseNotHeld.
    const device = followSocket(edge, name, "alice");
    await until("the device's socket opens", () => device.open);
    const draft = { type: "write", entry: { kind: "app.note" }, requestId: "lapse-device-1" };
    device.send(encodeFollowMessage({ type: "call", id: "d1", topic: COPY, method: "submit", args: [conversationId, draft] }));
    await until("the device's answer", () => device.received.length >= 1);
    expect(JSON.parse(device.received[0]!).error?.name).toBe("NotReady");
    device.stop();
    // The alarm would end the instance now; the next one takes the lease again, and the page's resend is made there.
    await edge.call("follow", name, "/abort").catch(() => undefined);
    const made = await until("the resend is made", async () => {
      const answer = await rpc("submit", [conversationId, note]);
      return answer.ok ? value<number>(answer) : undefined;
    });
    expect(await instanceOf(edge, name)).not.toBe(instance);
    // Sent once more, the same id; one note in the conversation.
    expect(await value<number>(await rpc("submit", [conversationId, note]))).toBe(made);
    const page = await value<{ entries: Array<{ kind: string }> }>(await rpc("conversationEntries", [conversationId, 1_000_000, 1000]));
    expect(page.entries.filter((entry) => entry.kind === "app.note")).toHaveLength(1);
    expect((await state()).lease?.epoch).toBeGreaterThan(held.lease!.epoch);
  }, 90_000);
});
