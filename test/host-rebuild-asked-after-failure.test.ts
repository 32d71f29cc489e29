import { describe, expect, it } from "vitest";
import { SnapshotUnavailable } from "../src/errors.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, type Harness } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";

// Decision 0078 (after decision 0070): a rebuild asked for while a failed rebuild's harness opens again is a new
// request, not that rebuild. The worker asks again on a timer after a failure; when its timer fires while the host
// still opens the harness after the failed run (its new follower not attached yet), the follower that then finds it
// cannot follow tells the host. Before, the host took that request for the rebuild under way and dropped it: nothing
// asked again (the timer had fired; the worker's follower is told no more until a reconnect), and the copy stayed as
// it was with its link up.

describe("a rebuild asked for after a failed rebuild's run ended (decision 0078)", () => {
  it("0078 (0070): asked while the failed rebuild's harness opens again, it runs once that reopen ends (before: dropped)", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    const attached: Harness[] = [];
    let rebuildNow: (() => void) | undefined;
    let runs = 0;
    let askedDuringReopen = false;
    const host = createHost({
      database: "tab",
      openStorage: async () => storage,
      harness: { registry: createRegistry() },
      onReady: (harness) => {
        attached.push(harness);
        // The failed rebuild's reopen (the second open): the copy reports it still cannot follow.
        if (attached.length === 2 && !askedDuringReopen) {
          askedDuringReopen = true;
          rebuildNow!();
        }
      },
      rebuild: {
        when: (listener) => void (rebuildNow = listener),
        run: async () => {
          runs++;
          if (runs === 1) throw new SnapshotUnavailable("busy", "the object's takes are spent");
        },
      },
      now: () => 0,
    });
    await host.ready;
    rebuildNow!();
    for (let i = 0; i < 400 && attached.length < 3; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(askedDuringReopen).toBe(true);
    expect(runs).toBe(2);
    expect(attached).toHaveLength(3);
    await host.service.close();
  });
});
