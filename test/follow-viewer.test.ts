import { describe, expect, it } from "vitest";
import { followObject } from "../src/browser/follow.ts";
import type { SocketLike } from "../src/browser/socket.ts";
import { createRegistry, Harness, ReadOnlySession } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { memoryObjectEnd } from "./follow-support.ts";
import { ctx } from "./support.ts";

// Review (session 9): a device the app lets watch its object (`follow.from`) but not take the lease (`lease.*`) —
// "a page gets the least it needs" (DESIGN §4b) — could not open its worker's harness at all: the object's door
// refused `lease.acquire` with NotAuthorized and `Harness.open` rethrew everything but LeaseNotHeld, so the open
// failed. It now opens read-only (S5) and follows, as when another place holds the lease; nothing is minted.

describe("a device that may watch but not write (S5, decision 0038)", () => {
  it("its lease.acquire refused by the door, the worker's harness opens read-only, writes are ReadOnlySession, no epoch minted", async () => {
    const clock = createManualClock(1_000);
    const { end, record } = await memoryObjectEnd(clock);
    const asked: string[] = [];
    const viewer = (action: string) => {
      asked.push(action);
      return !action.startsWith("lease.");
    };
    const listeners: Record<string, Array<(event?: { data: unknown }) => void>> = { open: [], message: [], close: [], error: [] };
    const toTab = (frame: string) =>
      setTimeout(() => {
        for (const listener of listeners.message!) listener({ data: frame });
      }, 0);
    const socket = {
      send(frame: string) {
        setTimeout(() => void end.receive(frame, toTab, viewer), 0);
      },
      close() {},
      addEventListener(type: string, listener: (event?: { data: unknown }) => void) {
        listeners[type]!.push(listener);
      },
    } as unknown as SocketLike;
    const follow = followObject({ url: "ws://object/follow", place: "viewer", connect: () => socket }, clock);
    setTimeout(() => {
      for (const listener of listeners.open!) listener();
    }, 0);
    // Before: rejected with NotAuthorized ("lease.acquire").
    const tab = await Harness.open(
      await openSqliteStorage({ vfs: "memory" }),
      { registry: createRegistry(), clock, lease: follow.lease },
      ctx,
    );
    follow.attach(tab);
    expect(tab.readOnly).toBe(true);
    expect(follow.place).toBe("elsewhere");
    expect(asked).toContain("lease.acquire");
    await expect(tab.createConversation({}, ctx)).rejects.toThrow(ReadOnlySession);
    expect(record()).toEqual({ epoch: 0 });
    follow.close();
    await tab.close(ctx);
  });
});
