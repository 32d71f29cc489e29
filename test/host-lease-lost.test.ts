import { describe, expect, it } from "vitest";
import { ConnectionLost, HandOverUnanswered, LeaseNotHeld } from "../src/errors.ts";
import type { LeaseArbiter } from "../src/follow/arbiter.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, type Harness } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { ctx, runUntil } from "./support.ts";

// Decision 0057 (issue 27): a tab that finds it lost its lease while it ran (its link down past the lease's expiry,
// another place took it) stops as after a crash. Before, the host kept that stopped harness: the status said the work
// ran "here", the page's calls went to a harness that served nothing, and the tab opened read-only (following the
// object, its fork kept and counted) only at its next load. Now the host opens it again read-only at once.
// Likewise a leave() whose hand-over the object never answered (HandOverUnanswered): the harness had given its lease up
// and stopped, and the status stayed "elsewhere" over it (review's fix 83bc6f9 covered only a leave that resolved
// false).

/** An arbiter that grants `tab` its first lease (3 s), then is unreachable (renewals fail, the link is down). */
function arbiterThenDown(): LeaseArbiter & { down: boolean } {
  const arbiter = {
    down: false,
    acquire: async () => {
      if (arbiter.down) throw new ConnectionLost();
      arbiter.down = true;
      return { epoch: 1, ttlMs: 3_000 };
    },
    renew: async () => {
      throw new ConnectionLost();
    },
    release: async (place: string) => {
      throw new LeaseNotHeld(place, "the link is down");
    },
  };
  return arbiter;
}

function hostUnderLease(leave?: (harness: () => Harness) => Promise<boolean>, resume?: true) {
  const clock = createManualClock(1_000);
  const attached: Harness[] = [];
  return (async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    const host = createHost({
      database: "tab",
      openStorage: async () => storage,
      harness: { registry: createRegistry(), clock, lease: { place: "tab", arbiter: arbiterThenDown() }, ...(resume ? { resume } : {}) },
      onReady: (harness) => void attached.push(harness),
      ...(leave ? { leave: () => leave(() => attached.at(-1)!) } : {}),
      now: () => clock.now(),
    });
    await host.ready;
    return { host, clock, attached };
  })();
}

// The browser worker opens its harness with `resume: true` (its autoResume), which Harness.open refuses beside
// `readOnly`: each read-only reopen failed there (twice: the fallback is read-only too), left no harness and a status
// stuck at "recovering" — e2e/rebuild.e2e.ts's forked-offline tab never counted its fork (0057's follow-up, fence).
describe.each([
  ["without resume", undefined],
  ["opened with resume: true, as the browser worker does", true as const],
])("the host when the lease is lost while the harness runs (decision 0057), %s", (_, resume) => {
  it("0057: a harness that finds its lease expired while it ran opens again read-only at once (status 'elsewhere', calls served), without a reload", async () => {
    const { host, clock, attached } = await hostUnderLease(undefined, resume);
    expect(host.service.status()).toMatchObject({ kind: "ready", runs: "here" });
    expect(attached[0]!.readOnly).toBe(false);
    // The renewals fail (the link is down); at the lease's expiry the harness stops.
    await runUntil(clock, () => attached.length === 2 && host.service.status().kind === "ready");
    expect(attached[0]!.closed).toBe(true);
    expect(attached[1]!.readOnly).toBe(true);
    expect(host.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
    expect(await host.service.inspect()).toBeDefined();
    await host.service.close();
  });

  it("0057: a lost lease turns the status 'elsewhere' as the stop begins, before the reopen: never 'here' while the harness stops", async () => {
    const { host, clock, attached } = await hostUnderLease(undefined, resume);
    const seen: string[] = [];
    host.service.onStatus((status) => seen.push(status.kind === "ready" ? `ready:${status.runs}` : status.kind));
    await runUntil(clock, () => attached.length === 2 && host.service.status().kind === "ready");
    // The first change after the loss says the work runs elsewhere; the reopen's statuses come after it.
    expect(seen.slice(0, 4)).toEqual(["ready:here", "ready:elsewhere", "opening", "recovering"]);
    expect(seen.slice(1)).not.toContain("ready:here");
    expect(seen.at(-1)).toBe("ready:elsewhere");
    await host.service.close();
  });

  it("0057: a leave() rejected as HandOverUnanswered opens the harness again read-only and rethrows; the status does not stay 'elsewhere' over a stopped harness", async () => {
    const { host, attached } = await hostUnderLease(async (current) => {
      const mark = await current().handOver(ctx, { drain: false });
      throw new HandOverUnanswered(mark.position);
    }, resume);
    expect(host.service.status()).toMatchObject({ kind: "ready", runs: "here" });
    await expect(host.service.leave()).rejects.toBeInstanceOf(HandOverUnanswered);
    expect(attached).toHaveLength(2);
    expect(attached[0]!.closed).toBe(true);
    expect(attached[1]!.readOnly).toBe(true);
    expect(attached[1]!.closed).toBe(false);
    expect(host.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
    expect(await host.service.inspect()).toBeDefined();
    await host.service.close();
  });
});
