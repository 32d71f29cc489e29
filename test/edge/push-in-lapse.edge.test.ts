import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { systemClock } from "../../src/base/clock.ts";
import { Follower } from "../../src/follow/follower.ts";
import { Mirror, remoteArbiter } from "../../src/follow/mirror.ts";
import type { HarnessStatus } from "../../src/host/protocol.ts";
import { createRegistry, BACKGROUND_CONTEXT as ctx, Harness } from "../../src/index.ts";
import { openSqliteStorage } from "../../src/storage/sqlite/open-storage.ts";
import { openDevice } from "./follow-copy-support.ts";
import { until } from "./follow-support.ts";
import { handOverIdle, holdUntilLapsed, instanceOf, objectState, openTabLink } from "./lapse-support.ts";
import { type Edge, startEdge } from "./support.ts";

// Decision 0145 (B) in workerd: the object's instance whose idle 3 s lease lapsed (decision 0052) still lives — its
// alarm held here so that the window stays open — and a tab opens again: its open takes the lapsed lease (a new epoch)
// and pushes its first transactions to that instance. Before: refused `StaleEpoch` (the instance counted its own open
// harness as the holder), and the tab's mirror stopped pushing for good. Then (0145): `NotReady`, pushed again. Now
// (decision 0149): the grant tells the instance it is superseded, and the tab's next frame ends it even with its alarm
// held; the next instance follows the tab and stores them, each once.

/** What a page shows of a status: its kind, and where the agent runs at which epoch once ready. */
function shown(status: HarnessStatus | undefined) {
  return status?.kind === "ready" ? `ready ${status.runs} epoch ${status.epoch}` : status?.kind;
}

describe("a tab takes an idle object's lapsed lease while its instance lives (decision 0145)", { timeout: 90_000 }, () => {
  let edge: Edge;
  beforeAll(async () => {
    edge = await startEdge();
  }, 120_000);
  afterAll(async () => {
    await edge?.dispose();
  });

  it("S4: the new holder's pushes are not refused StaleEpoch, and the next instance stores each once; a page's status says opening in the lapse", async () => {
    const name = "lapse-push"; // a 3 s lease
    const rpc = async <T>(method: string, args: unknown[]) => {
      const response = await edge.call("follow", name, "/rpc", {
        method: "POST",
        headers: { "x-caller": "alice", "content-type": "application/json" },
        body: JSON.stringify({ method, args }),
      });
      return ((await response.json()) as { value: T }).value;
    };
    const state = () => objectState(edge, name);
    const instanceName = () => instanceOf(edge, name);
    const registry = createRegistry();
    // A tab hands the lease over to the object (decision 0038) with nothing running: the object holds it, idle.
    const { link, socket } = await openTabLink(edge, name);
    const storage = await openSqliteStorage({ vfs: "memory" });
    const conversationId = await handOverIdle(storage, registry, link);
    await until("the object holds the lease", async () => (await state()).holding);
    // The tab opens again read-only (the object holds the lease) and follows it: its copy holds the object's takeover.
    const reader = await Harness.open(storage, { registry, lease: { place: "tab", arbiter: remoteArbiter(link) } }, ctx);
    expect(reader.readOnly).toBe(true);
    const follower = new Follower({ harness: reader, link, place: "tab" });
    const held = await state();
    expect(held).toMatchObject({ holding: true, lease: { holder: "object" } });
    await until("the tab's copy holds the object's head", () => follower.head >= held.head);
    const instance = await instanceName();
    // A page connected to the object itself (connectHarness(url)) watches its status (decision 0145).
    const page = openDevice(edge, name, "alice");
    const seen: HarnessStatus[] = [];
    page.onStatus((status) => void seen.push(status));
    await until("the page sees the object run", () => shown(page.status) === `ready here epoch ${held.lease!.epoch}`);
    await holdUntilLapsed(edge, name);
    // Asked in the lapse, the status is opening (before: ready, runs here, the lapsed epoch); that ask is an event of
    // the instance, which tells the page's watch the same.
    expect(shown(await rpc<HarnessStatus>("status", []))).toBe("opening");
    await until("the page's watch says opening", () => page.status.kind === "opening");

    // The tab opens again on its storage (at the object's head): its open takes the lapsed lease under a new epoch.
    follower.stop();
    await reader.close(ctx);
    const tab = await Harness.open(storage, { registry, lease: { place: "tab", arbiter: remoteArbiter(link) } }, ctx);
    expect(tab.readOnly).toBe(false);
    const epoch = tab.lease!.epoch;
    expect(epoch).toBeGreaterThan(held.lease!.epoch);
    const mirror = new Mirror({ harness: tab, link, clock: systemClock, resendMs: 500 });
    await (await tab.root(ctx)).submit({ type: "write", entry: { kind: "app.note" } }, ctx);
    const stored = tab.lease!.position;
    // Before 0145: StaleEpoch ("the object's copy"), final: the mirror stopped pushing. Since 0149 the lapsed instance
    // (its alarm held) ends at the tab's next frame after the grant, instead of answering each push NotReady until its
    // alarm (that answer: test/push-in-lapse.test.ts); the next one follows the tab and takes the pushes, each once.
    await until("the object acknowledged every push", () => mirror.acknowledged >= stored);
    expect(mirror.refused).toBeUndefined();
    expect(await instanceName()).not.toBe(instance);
    const entries = await rpc<{ entries: Array<{ kind: string }> }>("conversationEntries", [conversationId, 1_000_000, 1000]);
    expect(entries.entries.filter((entry) => entry.kind === "app.note")).toHaveLength(1);
    // The page's watch: the object ran, the lapse (opening), the drop of the instance's sockets, and the next instance,
    // which follows the tab: elsewhere, at the tab's epoch once its pushes arrived. In that order; never here again.
    await until("the page sees the tab's epoch", () => shown(page.status) === `ready elsewhere epoch ${epoch}`);
    const told = seen.map(shown).filter((status, i, all) => i === 0 || status !== all[i - 1]);
    const lapse = told.indexOf("opening");
    expect(told.slice(0, lapse)).toContain(`ready here epoch ${held.lease!.epoch}`);
    expect(told.slice(lapse + 1).every((status) => status === "reconnecting" || status?.startsWith("ready elsewhere"))).toBe(true);
    page.close();
    mirror.stop();
    socket.stop();
    await tab.close(ctx);
  }, 90_000);

  it("S4 (decision 0149): with the alarm late (held), the new holder's next frame ends the superseded instance and the next one stores its pushes once", async () => {
    const name = "lapse-push-late-alarm"; // a 3 s lease
    const state = () => objectState(edge, name);
    const instanceName = () => instanceOf(edge, name);
    const registry = createRegistry();
    const { link, socket } = await openTabLink(edge, name);
    const storage = await openSqliteStorage({ vfs: "memory" });
    const conversationId = await handOverIdle(storage, registry, link);
    await until("the object holds the lease", async () => (await state()).holding);
    const reader = await Harness.open(storage, { registry, lease: { place: "tab", arbiter: remoteArbiter(link) } }, ctx);
    const follower = new Follower({ harness: reader, link, place: "tab" });
    const held = await state();
    await until("the tab's copy holds the object's head", () => follower.head >= held.head);
    const instance = await instanceName();
    // The alarm that would end the superseded instance never comes to this one (as a late alarm): nothing else is asked.
    await holdUntilLapsed(edge, name);
    follower.stop();
    await reader.close(ctx);
    const tab = await Harness.open(storage, { registry, lease: { place: "tab", arbiter: remoteArbiter(link) } }, ctx);
    expect(tab.readOnly).toBe(false);
    const epoch = tab.lease!.epoch;
    expect(epoch).toBeGreaterThan(held.lease!.epoch);
    const mirror = new Mirror({ harness: tab, link, clock: systemClock, resendMs: 500 });
    await (await tab.root(ctx)).submit({ type: "write", entry: { kind: "app.note" } }, ctx);
    const stored = tab.lease!.position;
    // Before: the instance lived on with its alarm held, and answered every push NotReady (this never held). No /abort.
    await until("the object acknowledged every push", () => mirror.acknowledged >= stored);
    expect(mirror.refused).toBeUndefined();
    expect(await instanceName()).not.toBe(instance);
    expect((await state()).lease).toMatchObject({ holder: "tab", epoch });
    const response = await edge.call("follow", name, "/rpc", {
      method: "POST",
      headers: { "x-caller": "alice", "content-type": "application/json" },
      body: JSON.stringify({ method: "conversationEntries", args: [conversationId, 1_000_000, 1000] }),
    });
    const entries = ((await response.json()) as { value: { entries: Array<{ kind: string }> } }).value.entries;
    expect(entries.filter((entry) => entry.kind === "app.note")).toHaveLength(1);
    mirror.stop();
    socket.stop();
    await tab.close(ctx);
  }, 90_000);
});
