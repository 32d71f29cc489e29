import { describe, expect, it } from "vitest";
import { memoryArbiter } from "../src/follow/arbiter.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";

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
});
