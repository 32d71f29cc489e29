import { describe, expect, it } from "vitest";
import { ConnectionLost, LeaseNotHeld } from "../src/errors.ts";
import { createHost } from "../src/host/host.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createRegistry, defineExtension, defineTask } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import type { Storage } from "../src/storage/storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { ctx, openHarness, runUntil, stallNoting } from "./support.ts";

/**
 * Review of decision 0128, M1: a browser worker's host tells `ready` after the resumed tasks' first turn. A reopen in
 * that wait — the lease found lost at the first resumed step (the host reopens read-only), or a leave — replaced the
 * harness the open was telling about: the open then read the replaced harness (`undefined`: a TypeError told to the page
 * as `failed`, `ready` rejected, the Web Lock let go under the reopened copy), or told its stale status after the
 * reopen's (the read-only copy shown with the first open's recovery). The open now tells nothing once it was replaced.
 */

const stall = stallNoting(() => {});
let seeding = true;
let atFirstStep: (() => void) | undefined;
const bumper = defineTask<null, { phase: "a"; n: number }, null>({
  name: "test.bumper",
  version: 1,
  initial: () => ({ phase: "a", n: 0 }),
  phases: {
    a: async (task, runtime, context) => {
      if (!seeding) {
        atFirstStep?.();
        await runtime.commit(() => ({ status: "running", checkpoint: { phase: "a", n: task.state.checkpoint.n + 1 } }), context);
      }
      await runtime.untilAborted();
      throw new Error("stopped");
    },
  },
  abort: async () => {},
});
const registry = () => createRegistry().install(defineExtension({ name: "test", tasks: [bumper, stall] }));

/** A database a crash cut off with the bumper and `stalled` other tasks running. */
async function crashedImage(stalled: number) {
  seeding = true;
  const seeded = await openSqliteStorage({ vfs: "memory" });
  const { harness, clock } = await openHarness(seeded, { registry: registry() });
  await (await harness.root(ctx)).commit((tx) => {
    tx.createTask(bumper, null);
    for (let i = 0; i < stalled; i++) tx.createTask(stall, null);
  }, ctx);
  harness.resume();
  await runUntil(clock, async () => (await harness.query("SELECT 1 FROM tasks WHERE status = 'running'")).length === 1 + stalled);
  const image = seeded.exportImage();
  seeding = false;
  return image;
}

/** `storage` answering 5 ms late once `slow()` says so (as OPFS does; memory answers at once). */
function lateAnswers(storage: Storage, slow: () => boolean): Storage {
  return new Proxy(storage, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) =>
        slow() ? new Promise((resolve) => setTimeout(resolve, 5)).then(() => value.apply(target, args)) : value.apply(target, args);
    },
  });
}

async function leaseLostAtFirstStep(stalled: number, late: boolean) {
  const image = await crashedImage(stalled);
  let slow = false;
  const storage = lateAnswers(await openSqliteStorage({ vfs: "memory", image }), () => slow);
  const clock = createManualClock(5_000);
  // The object grants the lease at the open, then is unreachable: the lease expires and nothing renews it.
  const arbiter = {
    acquire: async () => ({ epoch: 1, ttlMs: 3_000 }),
    renew: async () => {
      throw new ConnectionLost();
    },
    release: async (place: string) => {
      throw new LeaseNotHeld(place, "the link is down");
    },
  };
  atFirstStep = () => {
    atFirstStep = undefined;
    clock.advance(10_000); // the lease expires before the first resumed step's commit is stamped
    slow = late;
  };
  const seen: HarnessStatus[] = [];
  const served = createHost({
    database: "tab",
    openStorage: async () => storage,
    harness: { registry: registry(), clock, resume: true, lease: { place: "tab", arbiter } as never },
    now: () => clock.now(),
    nextTurn: () => new Promise<void>((resolve) => setTimeout(resolve, 0)), // as the browser worker's host
  });
  served.service.onStatus((status: HarnessStatus) => void seen.push(status));
  const outcome = await served.ready.then(
    () => "resolved",
    (error: Error) => `rejected: ${error.message}`,
  );
  await runUntil(clock, () => served.service.status().kind === "ready" && seen.at(-1)?.kind === "ready");
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setTimeout(resolve, 1)); // a stale status would come now
  return { outcome, seen, served };
}

describe("a reopen while the open waits to tell ready (review of 0128, M1; S4, S12)", () => {
  it("storage answering late: no failed status, ready resolves, the copy is shown as read-only", async () => {
    const { outcome, seen, served } = await leaseLostAtFirstStep(0, true);
    expect(outcome).toBe("resolved");
    expect(seen.filter((status) => status.kind === "failed")).toEqual([]);
    const last = seen.at(-1);
    expect(last?.kind === "ready" && last.runs).toBe("elsewhere");
    await served.service.close();
  });

  it("storage answering at once: the first open's stale status is not told after the reopen's", async () => {
    const { outcome, seen, served } = await leaseLostAtFirstStep(200, false);
    expect(outcome).toBe("resolved");
    const readies = seen.filter((status) => status.kind === "ready");
    // The reopened read-only copy recovered nothing itself; the first open's 201 cut-off tasks are not its status.
    expect(readies.map((status) => status.kind === "ready" && status.runs)).not.toContain("here");
    const last = readies.at(-1);
    expect(last?.kind === "ready" && last.recovered.length).toBe(0);
    await served.service.close();
  });
});
