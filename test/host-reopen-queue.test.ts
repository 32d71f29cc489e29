import { describe, expect, it } from "vitest";
import { ConnectionLost, LeaseNotHeld } from "../src/errors.ts";
import type { LeaseArbiter } from "../src/follow/arbiter.ts";
import { createHost } from "../src/host/host.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createRegistry, type Harness } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { heldUntilGranted } from "./held-lease.ts";
import { runUntil } from "./support.ts";

// Decision 0070 (issue 27): what the host is told while it opens its harness again (a fenced harness's read-only
// reopen, runHere, leave, a rebuild) is not lost. Before, a rebuild asked for during another reopen was dropped
// (`reopening ??=`, or no harness to rebuild while the reopen ran): the copy that could not follow stayed as it was
// until the next load. And a fork reported while the status was not ready was counted only if the open's own count
// read the storage after it: one kept after that read waited for something else to recount.

/** An arbiter that grants `tab` its first lease (3 s), then is unreachable (renewals fail, the link is down). */
function arbiterThenDown(): LeaseArbiter {
  let down = false;
  return {
    acquire: async () => {
      if (down) throw new ConnectionLost();
      down = true;
      return { epoch: 1, ttlMs: 3_000 };
    },
    renew: async () => {
      throw new ConnectionLost();
    },
    release: async (place: string) => {
      throw new LeaseNotHeld(place, "the link is down");
    },
  };
}

const ready = (status: HarnessStatus) => status.kind === "ready";

describe("the host's reopens hear what is asked meanwhile (decision 0070)", () => {
  it("0070: a rebuild asked for while a fenced harness opens again read-only starts once that reopen ends (before: dropped)", async () => {
    const clock = createManualClock(1_000);
    const storage = await openSqliteStorage({ vfs: "memory" });
    const attached: Harness[] = [];
    let rebuildNow: (() => void) | undefined;
    let rebuilt = 0;
    const host = createHost({
      database: "tab",
      openStorage: async () => storage,
      harness: { registry: createRegistry(), clock, lease: { place: "tab", arbiter: arbiterThenDown() } },
      onReady: (harness) => void attached.push(harness),
      rebuild: {
        when: (listener) => void (rebuildNow = listener),
        run: async () => void rebuilt++,
      },
      now: () => clock.now(),
    });
    await host.ready;
    // The copy finds it cannot follow while the fenced harness is opening again (its status "opening").
    let asked = false;
    host.service.onStatus((status) => {
      if (status.kind === "opening" && !asked) {
        asked = true;
        rebuildNow!();
      }
    });
    await runUntil(clock, () => attached.length === 3 && ready(host.service.status()));
    expect(asked).toBe(true);
    expect(rebuilt).toBe(1);
    expect(attached[1]!.closed).toBe(true); // the fenced reopen's harness, closed for the rebuild
    expect(attached[2]!.readOnly).toBe(true);
    expect(host.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
    await host.service.close();
  });

  // A guard, as before (the old code dropped every request meanwhile): the queue does not ask for the snapshot twice.
  it("0070: a rebuild asked for during a rebuild is that rebuild: one run, not a second take of the object's snapshot", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    const attached: Harness[] = [];
    let rebuildNow: (() => void) | undefined;
    let rebuilt = 0;
    let release: (() => void) | undefined;
    const host = createHost({
      database: "tab",
      openStorage: async () => storage,
      harness: { registry: createRegistry() },
      onReady: (harness) => void attached.push(harness),
      rebuild: {
        when: (listener) => void (rebuildNow = listener),
        run: async () => {
          rebuilt++;
          await new Promise<void>((resolve) => (release = resolve));
        },
      },
      now: () => 0,
    });
    await host.ready;
    rebuildNow!();
    await until(() => release !== undefined);
    rebuildNow!(); // asked again while the first one runs
    release!();
    await until(() => attached.length === 2 && ready(host.service.status()));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(rebuilt).toBe(1);
    expect(attached).toHaveLength(2);
    await host.service.close();
  });

  it("0070: a rebuild asked for during a runHere that took the lease is not run over the copy that now writes here", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    const attached: Harness[] = [];
    let rebuildNow: (() => void) | undefined;
    let rebuilt = 0;
    const { arbiter, grant } = heldUntilGranted();
    const host = createHost({
      database: "tab",
      openStorage: async () => storage,
      harness: { registry: createRegistry(), lease: { place: "tab", arbiter } },
      onReady: (harness) => void attached.push(harness),
      takeBack: async () => {
        grant();
        rebuildNow!(); // a report from the copy as it was, while the lease comes back
      },
      rebuild: {
        when: (listener) => void (rebuildNow = listener),
        run: async () => void rebuilt++,
      },
      now: () => 0,
    });
    await host.ready;
    expect(attached[0]!.readOnly).toBe(true);
    await host.service.runHere();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(rebuilt).toBe(0);
    expect(attached).toHaveLength(2);
    expect(attached[1]!.readOnly).toBe(false);
    expect(host.service.status()).toMatchObject({ kind: "ready", runs: "here" });
    await host.service.close();
  });

  it("0070 (0039): a fork kept and reported after runHere's open read its count is counted once the harness is ready (before: not until something else recounted)", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    let reportFork: (() => void) | undefined;
    const { arbiter, grant } = heldUntilGranted();
    const host = createHost({
      database: "tab",
      openStorage: async () => storage,
      harness: { registry: createRegistry(), lease: { place: "tab", arbiter } },
      takeBack: async () => grant(),
      onFork: (listener) => void (reportFork = listener),
      now: () => 0,
    });
    await host.ready;
    expect(host.service.status()).not.toHaveProperty("forks");
    // The reopen's open reads the forks kept (its status "recovering"); right after that read a fork is kept and
    // reported (the follow link finding it on the copy as it was), before the status is ready.
    const read = storage.readForks!.bind(storage);
    let armed = true;
    storage.readForks = async () => {
      const rows = await read();
      if (armed && host.service.status().kind === "recovering") {
        armed = false;
        await storage.keepFork!("fork-1", { id: "fork-1", mine: { epoch: 1 }, from: 1 });
        reportFork!();
      }
      return rows;
    };
    await host.service.runHere();
    expect(armed).toBe(false);
    expect(host.service.status()).toMatchObject({ kind: "ready", runs: "here", forks: 1 });
    await host.service.close();
  });
});

async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  if (!done()) throw new Error("until: condition never held");
}
