import { describe, expect, it } from "vitest";
import { createHost } from "../src/host/host.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createRegistry, type Harness } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";

// Decision 0053 says a page's calls made while the worker reopens its copy (a rebuild from the object's snapshot) wait
// for the new copy (`whenOpen`). The app's own methods (`client.call(name, …)`) did not: they asked for the harness at
// once and failed with "The database is not open (status: ready)" — the status still said ready while the old copy
// was closed and the new one not yet open. Seen in Chromium (e2e/rebuild.e2e.ts, the new device): the demo's
// `models.list`, called as its client appeared, showed that error once in a CI run.

/** A read-only host whose rebuild waits for `release()`, with one app method that answers with the harness it ran on. */
async function rebuildingHost() {
  const storage = await openSqliteStorage({ vfs: "memory" });
  const opened: Harness[] = [];
  let rebuildNow: (() => void) | undefined;
  let release: (() => void) | undefined;
  const host = createHost({
    database: "tab",
    openStorage: async () => storage,
    harness: { registry: createRegistry() },
    onReady: (harness) => void opened.push(harness),
    methods: { "which.harness": (harness: Harness) => opened.indexOf(harness) },
    rebuild: {
      when: (listener) => void (rebuildNow = listener),
      run: () => new Promise<void>((resolve) => (release = resolve)),
    },
    now: () => 0,
  });
  await host.ready;
  return { host, opened, rebuild: () => rebuildNow!(), released: () => release !== undefined, release: () => release!() };
}

describe("an app method called while the host reopens its copy waits for the new copy (decision 0053)", () => {
  it("0053: called while the snapshot replaces the copy, it runs on the rebuilt harness (before: 'The database is not open (status: ready)')", async () => {
    const tab = await rebuildingHost();
    expect(await tab.host.service.call("which.harness")).toBe(0);
    tab.rebuild();
    await until(tab.released);
    const called = tab.host.service.call("which.harness");
    tab.release();
    expect(await called).toBe(1);
    await tab.host.service.close();
  });

  it("0053: called while the rebuilt copy opens, it waits for it too", async () => {
    const tab = await rebuildingHost();
    let called: Promise<unknown> | undefined;
    tab.host.service.onStatus((status: HarnessStatus) => {
      if (!called && tab.released() && (status.kind === "opening" || status.kind === "recovering"))
        called = tab.host.service.call("which.harness");
    });
    tab.rebuild();
    await until(tab.released);
    tab.release();
    await until(() => called !== undefined);
    expect(await called).toBe(1);
    await tab.host.service.close();
  });
});

async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  if (!done()) throw new Error("until: condition never held");
}
