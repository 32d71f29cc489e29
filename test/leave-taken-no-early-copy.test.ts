import { expect, it } from "vitest";
import type { LeaseArbiter } from "../src/follow/arbiter.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, type Harness } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { ctx, flush, settled } from "./support.ts";

// Decision 0133 (left by 0125 and 0127): a leave whose host option never tells `handedOver` (no copy opened at the
// hand-over) and whose object took the lease opened the harness again *writable*: that open asked the object for the
// lease (a link call, bounded at 15 s) while no copy was open, and every read waited for it. The object took the lease,
// so the copy is read-only either way: it now opens read-only, with no lease asked (as 0127 did for the rebuild).

it("S5: a leave taken with no copy opened at the hand-over opens the copy read-only without asking the lease: reads answer while the object's link is silent", async () => {
  const clock = createManualClock(0);
  const storage = await openSqliteStorage({ vfs: "memory" });
  let asks = 0;
  const arbiter: LeaseArbiter = {
    // The first ask grants; every later one goes over a link gone silent (never answered).
    acquire: async () => (++asks === 1 ? { epoch: 1, ttlMs: 60_000 } : new Promise(() => {})),
    renew: async () => ({ epoch: 1, ttlMs: 60_000 }),
    release: async () => {},
  };
  const opened: Harness[] = [];
  const host = createHost({
    database: "tab",
    openStorage: async () => storage,
    harness: { registry: createRegistry(), clock, lease: { place: "tab", arbiter } },
    onReady: (harness) => void opened.push(harness),
    // A hand-over that stops the harness and is taken, never telling `handedOver` (no early copy).
    leave: async () => {
      await opened[0]!.close(ctx);
      return true;
    },
    now: () => clock.now(),
  });
  await host.ready;
  expect(opened[0]!.readOnly).toBe(false);
  const left = settled(host.service.leave(), "ok");
  await flush(16);
  const query = settled(host.service.query("SELECT count(*) AS n FROM tasks"), "ok");
  const conversations = settled(host.service.listConversations(), "ok");
  await flush(16);
  // Before: the writable open waited on the silent lease ask, and the leave and every read with it.
  expect({ left: left.outcome, query: query.outcome, conversations: conversations.outcome }).toEqual({
    left: "ok",
    query: "ok",
    conversations: "ok",
  });
  expect(asks).toBe(1); // the object took the lease: nothing asked for it again
  expect(opened).toHaveLength(2);
  expect(opened[1]!.readOnly).toBe(true);
  expect(host.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
  await host.service.close();
});
