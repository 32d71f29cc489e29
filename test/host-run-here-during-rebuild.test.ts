import { describe, expect, it } from "vitest";
import { createHost } from "../src/host/host.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createRegistry, type Harness } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { heldUntilGranted } from "./held-lease.ts";

// Decision 0053 says a page's calls made while the worker rebuilds its copy wait for the new copy. `runHere` did not:
// pressed while the rebuild replaced the copy it resolved with that rebuild and took nothing back (the agent stayed on
// the object), and pressed while the rebuilt copy opened (status "opening"/"recovering") it rejected with "The
// database is not open". Seen in Chromium against `wrangler dev`: a reopened tab's Run here during its rebuild.

/** A host read-only under its object's lease, with a rebuild that waits for `release()`. */
async function followingHost() {
  const storage = await openSqliteStorage({ vfs: "memory" });
  const attached: Harness[] = [];
  let rebuildNow: (() => void) | undefined;
  let release: (() => void) | undefined;
  let takeBacks = 0;
  const { arbiter, grant } = heldUntilGranted();
  const host = createHost({
    database: "tab",
    openStorage: async () => storage,
    harness: { registry: createRegistry(), lease: { place: "tab", arbiter } },
    onReady: (harness) => void attached.push(harness),
    takeBack: async () => {
      takeBacks++;
      grant();
    },
    rebuild: {
      when: (listener) => void (rebuildNow = listener),
      run: () => new Promise<void>((resolve) => (release = resolve)),
    },
    now: () => 0,
  });
  await host.ready;
  expect(attached[0]!.readOnly).toBe(true);
  return {
    host,
    attached,
    rebuild: () => rebuildNow!(),
    released: () => release !== undefined,
    release: () => release!(),
    takeBacks: () => takeBacks,
  };
}

describe("runHere pressed while the worker rebuilds its copy waits for the rebuilt copy, then takes the lease back", () => {
  it("0053: pressed while the snapshot replaces the copy (before: it resolved with the rebuild and the tab stayed read-only)", async () => {
    const tab = await followingHost();
    tab.rebuild();
    await until(tab.released);
    const pressed = tab.host.service.runHere();
    tab.release();
    await pressed;
    expect(tab.takeBacks()).toBe(1);
    expect(tab.attached.at(-1)!.readOnly).toBe(false);
    expect(tab.host.service.status()).toMatchObject({ kind: "ready", runs: "here" });
    await tab.host.service.close();
  });

  it("0053: pressed while the rebuilt copy opens (before: rejected with 'The database is not open (status: opening)')", async () => {
    const tab = await followingHost();
    let pressed: Promise<void> | undefined;
    tab.host.service.onStatus((status: HarnessStatus) => {
      if (!pressed && tab.released() && (status.kind === "opening" || status.kind === "recovering")) pressed = tab.host.service.runHere();
    });
    tab.rebuild();
    await until(tab.released);
    tab.release();
    await until(() => pressed !== undefined);
    await pressed;
    expect(tab.takeBacks()).toBe(1);
    expect(tab.attached.at(-1)!.readOnly).toBe(false);
    expect(tab.host.service.status()).toMatchObject({ kind: "ready", runs: "here" });
    await tab.host.service.close();
  });
});

async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  if (!done()) throw new Error("until: condition never held");
}
