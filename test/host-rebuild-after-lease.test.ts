import { describe, expect, it } from "vitest";
import { LeaseNotHeld } from "../src/errors.ts";
import type { LeaseArbiter } from "../src/follow/arbiter.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, type Harness } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { heldUntilGranted } from "./held-lease.ts";

// Decision 0078 (issue 27, after decision 0070): a rebuild the copy asks for after its harness took the lease here is
// refused. The follow link's report is late: the fork it found is kept first (a storage write), and only then is the
// host told — by which time runHere may have taken the lease back and opened the harness under it. Decision 0070
// checked only a request queued behind a reopen; one arriving after the reopen ended closed the writing harness and
// replaced its copy from the object's snapshot (what it wrote since it took the lease was lost to the snapshot).

describe("a rebuild asked for after the lease was taken here (decision 0078)", () => {
  it("0078 (0070): a rebuild asked for after runHere took the lease back is refused: the writing harness stays open, its copy is not replaced", async () => {
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
      takeBack: async () => grant(),
      rebuild: {
        when: (listener) => void (rebuildNow = listener),
        run: async () => void rebuilt++,
      },
      now: () => 0,
    });
    await host.ready;
    await host.service.runHere();
    expect(attached[1]!.readOnly).toBe(false);
    rebuildNow!(); // the copy's late report: it could not follow, as it was before the lease came back
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(rebuilt).toBe(0);
    expect(attached).toHaveLength(2);
    expect(attached[1]!.closed).toBe(false);
    expect(host.service.status()).toMatchObject({ kind: "ready", runs: "here" });
    await host.service.close();
  });

  it("0078 (a guard): a read-only copy still rebuilds when asked", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    const attached: Harness[] = [];
    let rebuildNow: (() => void) | undefined;
    let rebuilt = 0;
    const arbiter: LeaseArbiter = {
      acquire: async (place) => {
        throw new LeaseNotHeld(place, "the object holds it");
      },
      renew: async (place) => {
        throw new LeaseNotHeld(place, "the object holds it");
      },
      release: async () => {},
    };
    const host = createHost({
      database: "tab",
      openStorage: async () => storage,
      harness: { registry: createRegistry(), lease: { place: "tab", arbiter } },
      onReady: (harness) => void attached.push(harness),
      rebuild: {
        when: (listener) => void (rebuildNow = listener),
        run: async () => void rebuilt++,
      },
      now: () => 0,
    });
    await host.ready;
    rebuildNow!();
    for (let i = 0; i < 400 && attached.length < 2; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(rebuilt).toBe(1);
    expect(attached[1]!.readOnly).toBe(true);
    await host.service.close();
  });
});
