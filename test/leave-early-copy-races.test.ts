import { describe, expect, it } from "vitest";
import { type SilentTabHooks, silentTab } from "./leave-early-copy-support.ts";
import { flush, settled } from "./support.ts";

// Decision 0125 opens the host's read-only copy at the hand-over, while the object's answer may not come (the link
// silent). Its review found what meets that early reopen (decision 0125's review, 2026-12-07): a close or a takeover
// while it opens (M1), the storage's reads while it opens (M2), its failure (L1), runHere before the answer (L2).

describe("the hand-over's early copy (decision 0125's review)", () => {
  it("S4: a close() that arrives as the copy reopens ends the host closed, nothing opened after it (M1)", async () => {
    let closed: Promise<void> | undefined;
    let close = () => {};
    const t = await silentTab({ handedOver: () => close() });
    close = () => void (closed = t.host.service.close());
    const statuses: string[] = [];
    t.host.service.onStatus((status) => void statuses.push(status.kind));
    t.silence();
    const left = t.pagehide();
    void left.catch(() => {});
    for (let i = 0; i < 8; i++) await t.step(250);
    await closed;
    await flush(16);
    // Before: closed, then opening, recovering, failed (the copy opened on the closed storage: HarnessClosed unhandled).
    expect(t.host.service.status().kind).toBe("closed");
    expect(statuses.at(-1)).toBe("closed");
    t.follow.close();
  });

  it("S4: a takeover request that arrives as the copy reopens opens no storage without the lock (M1)", async () => {
    let takeover: (() => void) | undefined;
    let acquires = 0;
    let owned = false;
    const storageOpens: boolean[] = [];
    const ownership = {
      acquire: async (waiting: () => void) => {
        acquires++;
        if (acquires > 1) {
          waiting();
          return new Promise<undefined>(() => {}); // the other tab holds it now
        }
        owned = true;
        return () => void (owned = false);
      },
      cancel: () => {},
      requestTakeover: () => {},
      onTakeoverRequest: (handler: () => void) => void (takeover = handler),
      lifeLock: async () => undefined,
    };
    const t = await silentTab({ ownership, handedOver: () => takeover!(), openStorage: () => void storageOpens.push(owned) });
    t.silence();
    const left = t.pagehide();
    void left.catch(() => {});
    for (let i = 0; i < 8; i++) await t.step(250);
    await flush(16);
    // Before: [true, false] (the copy's open ran after the lock went to the other tab) and the status failed.
    expect(storageOpens).toEqual([true]);
    expect(t.host.service.status().kind).toBe("waiting-for-lock");
    t.follow.close();
  });

  it("S5: forks(), exportDatabase() and dismissFork() asked as the copy reopens wait for it and answer, as query() does (M2)", async () => {
    const results: string[] = [];
    let ask = () => {};
    const t = await silentTab({ handedOver: () => queueMicrotask(() => ask()) });
    const s = t.host.service;
    ask = () => {
      const calls: Record<string, () => Promise<unknown>> = {
        forks: () => s.forks(),
        exportDatabase: () => s.exportDatabase(),
        dismissFork: () => s.dismissFork("none"),
        query: () => s.query("SELECT 1"),
      };
      for (const [name, call] of Object.entries(calls))
        void Promise.resolve()
          .then(call)
          .then(
            () => results.push(`${name}: ok`),
            (error: unknown) => results.push(`${name}: ${(error as Error).message}`),
          );
    };
    t.silence();
    const left = t.pagehide();
    void left.catch(() => {});
    await expect.poll(() => results.length).toBe(4);
    // Before: "The database is not open (status: ready)" for all but query.
    expect(results.sort()).toEqual(["dismissFork: ok", "exportDatabase: ok", "forks: ok", "query: ok"]);
    t.restore();
    for (let i = 0; i < 60 && !t.prints.includes("object tick 8"); i++) await t.step(250);
    await t.close();
  });

  it("S4: a copy that fails to open at the hand-over is no unhandled rejection, and the leave rejects with its error (L1)", async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => void unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      const t = await silentTab({
        onReady: (n) => {
          if (n === 2) throw new Error("attach failed");
        },
      });
      t.silence();
      let left: unknown = "unsettled";
      void t.pagehide().then((outcome) => void (left = outcome));
      await expect.poll(() => t.tab.closed).toBe(true);
      for (let i = 0; i < 4; i++) await t.step(50);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(unhandled).toEqual([]);
      t.restore();
      for (let i = 0; i < 60 && left === "unsettled"; i++) await t.step(250);
      // Before: the leave resolved ("taken") although the copy never opened.
      expect(String(left)).toContain("attach failed");
      await t.close();
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });

  it("S5: runHere() before the leave's answer waits for it, then takes the lease back (L2)", async () => {
    const t = await silentTab();
    t.silence();
    let left: unknown = "unsettled";
    void t.pagehide().then((outcome) => void (left = outcome));
    await expect.poll(() => t.tab.closed).toBe(true);
    await t.host.service.inspect();
    const outcome = settled(t.host.service.runHere(), "resolved");
    await flush(16);
    expect(outcome.outcome).toBeUndefined(); // waits for the answer (before: rejected LeaseNotHeld at once)
    t.restore();
    for (let i = 0; i < 60 && outcome.outcome === undefined; i++) await t.step(250);
    expect(left).not.toBe("unsettled");
    expect(outcome.outcome).toBe("resolved");
    await t.close();
  });

  it("S5: the copy opened at the hand-over shows no holder the object named before it (L3)", async () => {
    let tell: Parameters<NonNullable<SilentTabHooks["onHolder"]>>[0] | undefined;
    const t = await silentTab({ onHolder: (listener) => void (tell = listener) });
    // The object named another tab while this one followed it; this tab then ran here (runHere keeps the name).
    tell!({ place: "tab-b", object: false });
    expect(t.host.service.status()).toMatchObject({ kind: "ready", runs: "here" });
    t.silence();
    void t.pagehide();
    await expect.poll(() => t.tab.closed).toBe(true);
    await t.host.service.query("SELECT 1"); // the copy is open
    // Before: "held by tab tab-b" through the whole silent wait, while the object takes the lease.
    expect(t.host.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
    expect(t.host.service.status()).not.toHaveProperty("heldBy");
    t.restore();
    for (let i = 0; i < 60 && !t.prints.includes("object tick 8"); i++) await t.step(250);
    await t.close();
  });
});
