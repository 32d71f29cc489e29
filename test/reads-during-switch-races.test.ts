import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ConnectionLost, LeaseNotHeld } from "../src/errors.ts";
import { createHost } from "../src/host/host.ts";
import type { HarnessService } from "../src/host/protocol.ts";
import { createRegistry } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { heldUntilGranted } from "./held-lease.ts";
import { flush, settled } from "./support.ts";

// Decision 0127: what meets runHere's take-back now that reads answer from the copy during it — a close, a takeover,
// and any interleaving of reads, writes and closes around it over a link that answers or stays silent.

/** The follow link's call bound (link-client.ts's default). */
const BOUND_MS = 15_000;

/**
 * A host read-only under its object's lease whose take-back is a link call on a manual clock: `answer` grants the
 * lease after `answerMs`, or (undefined) the link is silent and the call fails at its bound. A manual `settle()` ends a
 * held take-back instead (`held`).
 */
async function followingHost(take: { answerMs?: number; held?: boolean } = {}) {
  const clock = createManualClock(0);
  const storage = await openSqliteStorage({ vfs: "memory" });
  const { arbiter, grant } = heldUntilGranted();
  let storageOpens = 0;
  let closedStorage = false;
  let settle: (() => void) | undefined;
  let takeover: (() => void) | undefined;
  let acquires = 0;
  const ownership = {
    acquire: async (waiting: () => void) => {
      if (++acquires > 1) {
        waiting();
        return new Promise<undefined>(() => {}); // another tab holds the database now
      }
      return () => {};
    },
    cancel: () => {},
    requestTakeover: () => {},
    onTakeoverRequest: (handler: () => void) => void (takeover = handler),
    lifeLock: async () => undefined,
  };
  const host = createHost({
    database: "tab",
    openStorage: async () => {
      storageOpens++;
      if (closedStorage) throw new Error("opened after its close");
      return storage;
    },
    ownership,
    harness: { registry: createRegistry(), clock, lease: { place: "tab", arbiter } },
    takeBack: () =>
      new Promise<void>((resolve, reject) => {
        const answer = () => {
          grant();
          resolve();
        };
        if (take.held) settle = answer;
        else if (take.answerMs !== undefined) clock.setTimer(take.answerMs, answer);
        else clock.setTimer(BOUND_MS, () => reject(new ConnectionLost()));
      }),
    now: () => clock.now(),
  });
  const opened = await host.ready;
  expect(opened.readOnly).toBe(true);
  const close = storage.close.bind(storage);
  storage.close = async () => {
    closedStorage = true;
    await close();
  };
  return {
    clock,
    service: host.service,
    storageOpens: () => storageOpens,
    settle: () => settle!(),
    takeover: () => takeover!(),
  };
}

describe("runHere's take-back meets a close, a takeover, and any interleaving of calls (decision 0127)", () => {
  it("S4: a take-back that ends after close() opens nothing: the host stays closed (before: it opened the closed storage's harness again)", async () => {
    const h = await followingHost({ held: true });
    const statuses: string[] = [];
    h.service.onStatus((status) => void statuses.push(status.kind));
    const runHere = settled(h.service.runHere(), "ok");
    await flush(2);
    await h.service.close();
    h.settle(); // the object answers: the lease is this tab's again
    await flush(16);
    expect(runHere.outcome).toBe("HarnessClosed"); // it does not run here: the host closed
    expect(statuses.slice(1)).toEqual(["closed"]); // before: closed, opening, recovering, failed
    expect(h.service.status().kind).toBe("closed");
  });

  it("S4: a take-back that ends after a takeover request opens nothing without the database: the host waits for it", async () => {
    const h = await followingHost({ held: true });
    const runHere = settled(h.service.runHere(), "ok");
    await flush(2);
    h.takeover();
    await flush(8);
    expect(h.service.status().kind).toBe("waiting-for-lock");
    h.settle();
    await flush(16);
    expect(runHere.outcome).toBe("HarnessClosed");
    expect(h.storageOpens()).toBe(1);
    expect(h.service.status().kind).toBe("waiting-for-lock"); // before: failed (its harness opened on the closed storage)
  });

  it("S5: a rebuild under a lease opens its copy again read-only: reads after the snapshot wait on no lease asked over a silent link (before: the writable open's lease ask held them, no copy open)", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    let acquires = 0;
    let rebuildNow: (() => void) | undefined;
    const host = createHost({
      database: "tab",
      openStorage: async () => storage,
      harness: {
        registry: createRegistry(),
        lease: {
          place: "tab",
          arbiter: {
            acquire: async (place) => {
              if (++acquires === 1) throw new LeaseNotHeld(place, "the object holds it");
              return new Promise<never>(() => {}); // the link went silent after the snapshot
            },
            renew: async () => new Promise<never>(() => {}),
            release: async () => {},
          },
        },
      },
      rebuild: {
        when: (listener) => void (rebuildNow = listener),
        closesCopy: true,
        run: async (_storage, closeCopy) => {
          await closeCopy(); // the snapshot is here: the copy closes before it is replaced
        },
      },
      now: () => 0,
    });
    expect((await host.ready).readOnly).toBe(true);
    rebuildNow!();
    await flush(2);
    const read = settled(host.service.query("SELECT count(*) AS n FROM tasks"), "ok");
    await flush(16);
    expect(read.outcome).toBe("ok");
    expect(acquires).toBe(1);
    expect(host.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
    await host.service.close();
  });

  it("S4/S5 (property): reads, writes, closes and clock moves around a take-back — every read asked before a close answers without the clock moving (never HarnessClosed, never an error); no call outlives the link's bound", async () => {
    type Command =
      | { kind: "read"; which: number }
      | { kind: "write" }
      | { kind: "runHere" }
      | { kind: "close" }
      | { kind: "advance"; ms: number };
    const command: fc.Arbitrary<Command> = fc.oneof(
      fc.record({ kind: fc.constant("read" as const), which: fc.nat(4) }),
      fc.constant({ kind: "write" as const }),
      fc.constant({ kind: "runHere" as const }),
      fc.constant({ kind: "close" as const }),
      fc.record({ kind: fc.constant("advance" as const), ms: fc.integer({ min: 1, max: 6_000 }) }),
    );
    const reads: Array<(service: HarnessService) => Promise<unknown>> = [
      (s) => s.query("SELECT count(*) AS n FROM tasks"),
      (s) => s.listConversations(),
      (s) => s.inspect(),
      (s) => s.forks(),
      (s) => s.exportDatabase(),
    ];
    await fc.assert(
      fc.asyncProperty(
        fc.option(fc.integer({ min: 0, max: 14_000 }), { nil: undefined }),
        fc.array(command, { minLength: 1, maxLength: 12 }),
        async (answerMs, commands) => {
          const h = await followingHost(answerMs === undefined ? {} : { answerMs });
          const calls: Array<{ read: boolean; state: { outcome?: string; error?: unknown } }> = [];
          let closed = false;
          for (const next of commands) {
            if (next.kind === "read") {
              const state = settled(reads[next.which]!(h.service), "ok");
              calls.push({ read: true, state });
              await flush(4);
              // Asked while the host was open: answered at once from the copy open (no clock moved), and not refused.
              if (!closed) expect(state.outcome).toBe("ok");
            } else {
              if (next.kind === "write") calls.push({ read: false, state: settled(h.service.createConversation(), "ok") });
              else if (next.kind === "runHere") calls.push({ read: false, state: settled(h.service.runHere(), "ok") });
              else if (next.kind === "close") {
                closed = true;
                calls.push({ read: false, state: settled(h.service.close(), "ok") });
              } else h.clock.advance(next.ms);
              await flush(4);
            }
          }
          // The link's bound passes (a take-back answers or fails by then; the writable open asks nothing of this fake),
          // twice: a runHere asked after another failed asks again.
          for (let i = 0; i < 2; i++) {
            h.clock.advance(BOUND_MS);
            await flush(16);
          }
          for (const call of calls) expect(call.state.outcome).toBeDefined();
          for (const call of calls) if (call.read && !closed) expect(call.state.error).toBeUndefined();
          if (!closed) await h.service.close();
        },
      ),
      { numRuns: 60 },
    );
  });
});
