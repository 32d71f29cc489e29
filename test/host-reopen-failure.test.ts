import { describe, expect, it } from "vitest";
import { ConnectionLost, LeaseNotHeld } from "../src/errors.ts";
import type { LeaseArbiter } from "../src/follow/arbiter.ts";
import { createHost } from "../src/host/host.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createRegistry, type Harness } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";

// Decisions 0045/0047: the host opens its harness again on the same storage after runHere's takeBack, after leave()
// and after a rebuild. The lease is asked of the object over the follow link there; a link that stays down past a
// call's timeout answers ConnectionLost. Before, that open's failure left the host with no harness and its status
// at 'recovering' for good (every page call 'The database is not open'), its database lock held: the page was wedged
// until a reload. Now the harness opens read-only on the same storage (nothing is written without the lease, the
// object's reservation for this place lapses, decision 0038) and the page may ask again.

/** An arbiter whose answers a test sets: another place holds the lease, or the link is down. */
function arbiterAnswering(answer: { now: "held elsewhere" | "link down" }): LeaseArbiter {
  return {
    acquire: async (place) => {
      if (answer.now === "link down") throw new ConnectionLost();
      throw new LeaseNotHeld(place, "the object holds it");
    },
    renew: async () => {
      throw new ConnectionLost();
    },
    release: async () => {},
  };
}

describe("the host's reopen when the lease cannot be asked (decisions 0045, 0047)", () => {
  for (const path of ["runHere", "leave", "rebuild"] as const)
    it(`0045/0047: a ${path} whose reopen meets a link that is down leaves a read-only harness ready, not a host wedged at 'recovering'`, async () => {
      const storage = await openSqliteStorage({ vfs: "memory" });
      const answer: { now: "held elsewhere" | "link down" } = { now: "held elsewhere" };
      let rebuildNow: (() => void) | undefined;
      const attached: Harness[] = [];
      const host = createHost({
        database: "tab",
        openStorage: async () => storage,
        harness: { registry: createRegistry(), lease: { place: "tab", arbiter: arbiterAnswering(answer) } },
        onReady: (harness) => void attached.push(harness),
        takeBack: async () => {
          answer.now = "link down"; // the object released here, and then the link went down
        },
        leave: async () => {
          answer.now = "link down";
          return true;
        },
        rebuild: {
          when: (listener) => void (rebuildNow = listener),
          run: async () => {
            answer.now = "link down";
          },
        },
        now: () => 0,
      });
      await host.ready;
      expect(host.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
      let settled: Promise<unknown>;
      if (path === "runHere") settled = expect(host.service.runHere()).rejects.toBeInstanceOf(ConnectionLost);
      else if (path === "leave") settled = host.service.leave().catch(() => {});
      else {
        rebuildNow!();
        settled = (async () => {
          for (let i = 0; i < 100 && attached.length < 2; i++) await new Promise((resolve) => setTimeout(resolve, 5));
        })();
      }
      await settled;
      for (let i = 0; i < 100 && host.service.status().kind !== "ready"; i++) await new Promise((resolve) => setTimeout(resolve, 5));
      const status = host.service.status() as HarnessStatus & { runs?: string };
      expect(status).toMatchObject({ kind: "ready", runs: "elsewhere" });
      // The page's calls are served again: a read on the harness answers.
      expect(await host.service.inspect()).toBeDefined();
      expect(attached).toHaveLength(2);
      expect(attached[1]!.readOnly).toBe(true);
      await host.service.close();
    });
});
