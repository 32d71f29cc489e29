import { describe, expect, it } from "vitest";
import { LEAVING_GRACE_MS, memoryArbiter } from "../src/follow/arbiter.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { createManualClock } from "../src/testing/clock.ts";

// Decision 0045: the ready status says where the agent runs (the demo's strip, a page's 'Move to the Durable
// Object'). A leave() the object never took — the link was down, so nothing of a hand-over could reach it
// (TabFollow.leave resolves false) — left the status at runs 'elsewhere' while the harness went on running and
// writing here under its lease: the page said the agent had moved when it had not.

describe("leave() that did not hand the lease over (decision 0045)", () => {
  it("0045: the status says the agent still runs here when the object did not take the lease (offline)", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    let clock = 0;
    const host = createHost({
      database: "tab",
      openStorage: async () => storage,
      harness: { registry: createRegistry(), lease: { place: "tab", arbiter: memoryArbiter({ clock: { now: () => clock } }) } },
      leave: async () => false, // offline: nothing could reach the object
      now: () => clock++,
    });
    const harness = await host.ready;
    expect(host.service.status()).toMatchObject({ kind: "ready", runs: "here" });
    await host.service.leave();
    expect(harness.readOnly).toBe(false);
    expect(harness.closed).toBe(false);
    expect(host.service.status()).toMatchObject({ kind: "ready", runs: "here" });
    await host.service.close();
  });

  it("decision 0113: the worker's link was down at leave(), but its page's own socket said lease.leaving: the harness runs here until a grace after the word, then is fenced, reopened read-only, and the status says the agent runs elsewhere", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    const clock = createManualClock(1_000);
    const host = createHost({
      database: "tab",
      openStorage: async () => storage,
      harness: { registry: createRegistry(), clock, lease: { place: "tab", arbiter: memoryArbiter({ clock, ttlMs: 30_000 }) } },
      leave: async () => false, // the worker's link is down: its release cannot go out
      now: () => clock.now(),
    });
    const harness = await host.ready;
    const epoch = harness.lease!.epoch;
    // What TabFollow.leavingSaid does with the page's LEAVING_SAID, heard at once.
    expect(harness.leaving(epoch + 1, clock.now() + LEAVING_GRACE_MS)).toBe(false); // another epoch's word: nothing
    expect(harness.leaving(epoch, clock.now() + LEAVING_GRACE_MS)).toBe(true);
    await host.service.leave();
    expect(host.service.status()).toMatchObject({ kind: "ready", runs: "here" });
    clock.advance(LEAVING_GRACE_MS - 1);
    expect(harness.closed).toBe(false);
    const kinds: string[] = [];
    host.service.onStatus((status) => void kinds.push(status.kind));
    clock.advance(1); // the object may take the lease over from now: this harness no longer writes
    await expect.poll(() => host.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
    expect(harness.closed).toBe(true);
    // Opened again, read-only: it follows (the kinds the status went through since the fence).
    await expect.poll(() => kinds.join(" ")).toContain("opening recovering ready");
    expect(host.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
    await host.service.close();
  });
});
