import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type LeaseArbiter, memoryArbiter } from "../src/follow/arbiter.ts";
import { continuesHistory, findFork, historyOf } from "../src/follow/fork.ts";
import { applyPushed } from "../src/follow/handover.ts";
import type { Batch, Storage } from "../src/index.ts";
import { MemoryStorage } from "../src/storage/memory.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { createWorld, openAgent, ScriptedModels, settle } from "./agent-support.ts";
import { backends, ctx } from "./support.ts";

// Issue 27 item 4, decision 0032: a place fenced while offline names its unpushed work as a visible fork — which
// transactions, which conversations, which entries — instead of losing or doubling it.

const empty = (): Batch => ({ tasks: [], conversations: [], entries: [], submissions: [], documents: [] });

/** Writes `count` transactions of `epoch` after the head, each appending one entry whose text says where it is. */
async function write(storage: Storage, epoch: number, count: number, who: string): Promise<void> {
  for (let i = 0; i < count; i++) {
    const position = ((await storage.load()).log?.position ?? 0) + 1;
    const id = 1_000 * epoch + position;
    await storage.apply({
      ...empty(),
      fence: { epoch, position },
      entries: [{ id, conversationId: 1, kind: "pi.user", payload: { text: `${who} ${position}` }, createdAt: position } as never],
    });
  }
}

for (const backend of backends) {
  describe(`the visible fork (decision 0032) on ${backend.name}`, () => {
    it("a tab fenced while offline names the input it took then: its conversation, its entries; the object's history never holds them", async () => {
      const clock = createManualClock(1_000);
      const arbiter = memoryArbiter({ clock, ttlMs: 3_000 });
      const tabStorage = await backend.create();
      let offline = false;
      const reach = <T>(call: () => Promise<T>) => (offline ? Promise.reject(new TypeError("Failed to fetch")) : call());
      const tabArbiter: LeaseArbiter = {
        acquire: (place, head) => reach(() => arbiter.acquire(place, head)),
        renew: (place, epoch) => reach(() => arbiter.renew(place, epoch)),
        release: (place, epoch, position) => reach(() => arbiter.release(place, epoch, position)),
      };
      const tab = await openAgent(tabStorage, {
        models: new ScriptedModels(),
        world: createWorld(),
        clock,
        lease: { place: "tab", arbiter: tabArbiter },
      });
      // The object's copy holds everything the tab pushed before the partition.
      const objectStorage = await backend.fromImage(await tabStorage.exportImage());
      const pushed = tab.harness.lease!.position;
      await tabStorage.trimLog?.(pushed);
      // Offline: the tab takes an input (no model answers it) and goes on until its lease runs out.
      offline = true;
      await tab.root.submit({ type: "input", content: "written offline", requestId: "offline-1" }, ctx);
      await settle();
      expect(tab.harness.lease!.position).toBeGreaterThan(pushed);
      clock.advance(3_000);
      const object = await openAgent(objectStorage, {
        models: new ScriptedModels(),
        world: createWorld(),
        clock,
        lease: { place: "object", arbiter },
      });
      expect(object.harness.lease!.epoch).toBe(2);

      const fork = await findFork(tabStorage, await historyOf(objectStorage));
      expect(fork).toMatchObject({ kind: "fork", from: pushed + 1, mine: { epoch: 1 }, theirs: { epoch: 2 } });
      expect(fork!.transactions.map((transaction) => transaction.position)).toEqual(
        Array.from({ length: tab.harness.lease!.position - pushed }, (_, index) => pushed + 1 + index),
      );
      expect(new Set(fork!.transactions.flatMap((transaction) => transaction.conversations))).toEqual(new Set([tab.root.id]));
      const inputs = fork!.transactions.flatMap((transaction) => transaction.entries).filter((entry) => entry.kind === "pi.user");
      expect(JSON.stringify(inputs)).toContain("written offline");
      expect(fork!.transactions.flatMap((transaction) => transaction.submissions)).toContainEqual(
        expect.objectContaining({ requestId: "offline-1", conversationId: tab.root.id }),
      );
      // Not applied silently: the object's copy has no trace of the input, and a push of the fork changes nothing.
      const theirs = await objectStorage.listEntries(tab.root.id);
      expect(JSON.stringify(theirs)).not.toContain("written offline");
      const objectHead = (await objectStorage.load()).log!;
      const forkBatches = (await tabStorage.readLog!(pushed, 64)).filter((batch) => batch.fence.position > pushed);
      expect(await applyPushed(objectStorage, objectHead.position, forkBatches)).toBe(objectHead.position);
      expect(JSON.stringify(await objectStorage.listEntries(tab.root.id))).not.toContain("written offline");
      // Nor the other way: the tab's copy is not a prefix of the object's history, so it may not follow its pushes.
      const history = await historyOf(objectStorage);
      expect(continuesHistory(history, (await tabStorage.load()).log)).toBe(false);
      expect(continuesHistory(history, { epoch: 1, position: pushed })).toBe(true);
      await object.harness.close(ctx);
    });
  });
}

describe("findFork (decision 0032)", () => {
  it("names exactly the tab's transactions after the common prefix once the object wrote a newer epoch, and none while it only lags (fast-check)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 6 }),
        fc.integer({ min: 0, max: 5 }),
        fc.integer({ min: 0, max: 5 }),
        fc.integer({ min: 0, max: 4 }),
        async (prefix, tabs, objects, lag) => {
          const tab = new MemoryStorage();
          await write(tab, 1, prefix, "both");
          const object = await MemoryStorage.fromImage(await tab.exportImage());
          await write(tab, 1, tabs, "tab");
          // The object either took over under epoch 2 (and wrote `objects`), or only lags `lag` behind the tab.
          if (objects > 0) await write(object, 2, objects, "object");
          else await write(object, 1, Math.max(0, tabs - lag), "tab");
          const fork = await findFork(tab, await historyOf(object));
          // A copy may follow another's pushes exactly when it has no fork against it and is not ahead of it.
          const theirs = await historyOf(object);
          const mine = (await tab.load()).log;
          const ahead = (mine?.position ?? 0) > (theirs.head?.position ?? 0);
          expect(continuesHistory(theirs, mine)).toBe(fork === undefined && !ahead);
          const expected = objects > 0 ? Array.from({ length: tabs }, (_, index) => prefix + 1 + index) : [];
          expect(fork?.transactions.map((transaction) => transaction.position) ?? []).toEqual(expected);
          if (fork)
            expect(fork.transactions.flatMap((t) => t.entries).every((entry) => JSON.stringify(entry.payload).includes("tab"))).toBe(true);
        },
      ),
      { numRuns: 60, seed: 32 },
    );
  });
});
