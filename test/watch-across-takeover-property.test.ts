import fc from "fast-check";
import { expect, it } from "vitest";
import { flush } from "./support.ts";
import { pageWatch, type Tab, takeoverWorld } from "./takeover-world.ts";

// Decision 0140, as a property: any interleaving of takeovers (some during a rebuild under way), rebuilds, the database coming back, commits on whichever tab
// holds it, pages that start or stop watching on tab `a`, and `a`'s close for good. A view on `a` hears nothing while
// another tab has the database (never a stale or closed harness), goes on once `a` opens again with the fresh view's
// entries (each once, in order), is never told lost while `a` may open again, and is told lost exactly once
// (HarnessClosed) when `a` closes for good; the host holds no view of a page that stopped or was told lost.

type Op =
  | { kind: "note" }
  | { kind: "watch" }
  | { kind: "unwatch"; which: number }
  | { kind: "takeover"; duringRebuild: boolean }
  | { kind: "rebuild" }
  | { kind: "back" }
  | { kind: "close" };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.constant({ kind: "note" as const }),
  fc.constant({ kind: "watch" as const }),
  fc.nat(7).map((which) => ({ kind: "unwatch" as const, which })),
  fc.boolean().map((duringRebuild) => ({ kind: "takeover" as const, duringRebuild })),
  fc.constant({ kind: "rebuild" as const }),
  fc.constant({ kind: "back" as const }),
  fc.constant({ kind: "close" as const }),
);

it("S5, S9 (property): views on a tab across takeovers, returns, watches and a close — nothing from a closed harness, fresh after each return, lost once only at the close", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 14 }), async (ops) => {
      const world = takeoverWorld();
      const a = world.tab("a", true);
      await a.served.ready;
      await a.note(0);
      const conversationId = (await a.service.listConversations())[0]!.id;
      const baseline = a.served.listenerCount();
      let other: Tab | undefined; // the tab that took the database, while it has it
      let closed = false;
      let payload = 0;
      const pages: Array<ReturnType<typeof pageWatch> & { unsubscribe: () => void; stopped: boolean; heardAtTakeover: number }> = [];
      const live = () => pages.filter((page) => !page.stopped && page.lost.length === 0);

      const checkFresh = async () => {
        const fresh = pageWatch(a.service, conversationId);
        const unsubscribe = await fresh.subscribed;
        await flush(8);
        unsubscribe();
        for (const page of live()) {
          expect(page.ids()).toEqual(fresh.ids());
          expect(page.ids()).toEqual([...new Set(page.ids())].sort((x, y) => x - y));
        }
      };

      for (const step of ops) {
        if (closed) break;
        if (step.kind === "note") {
          await (other ?? a).note(++payload);
        } else if (step.kind === "watch") {
          if (other) continue; // `a` is not open: a new watch is refused "not open", as before
          const page = pageWatch(a.service, conversationId);
          pages.push({ ...page, unsubscribe: await page.subscribed, stopped: false, heardAtTakeover: 0 });
        } else if (step.kind === "unwatch") {
          const page = live()[step.which % Math.max(1, live().length)];
          if (!page) continue;
          page.unsubscribe();
          page.stopped = true;
        } else if (step.kind === "takeover") {
          if (other) continue;
          await flush(8);
          for (const page of pages) page.heardAtTakeover = page.updates.length;
          other = world.tab(`other-${payload}`);
          await flush(4);
          if (step.duringRebuild) {
            a.rebuild(); // its reopen is under way when the takeover comes (0134's closedMeanwhile path)
            await flush(4);
          }
          other.service.requestTakeover();
          if (step.duringRebuild) a.endRebuild();
          await expect.poll(() => other!.service.status().kind).toBe("ready");
        } else if (step.kind === "rebuild") {
          if (other) continue;
          a.rebuild();
          await flush(4);
          a.endRebuild();
          await expect.poll(() => a.harness()).toBeDefined();
          await flush(8);
          await checkFresh();
        } else if (step.kind === "back") {
          if (!other) continue;
          await flush(8);
          for (const page of pages) expect(page.updates.length).toBe(page.heardAtTakeover); // nothing while away
          await other.service.close();
          other = undefined;
          await expect.poll(() => a.service.status().kind).toBe("ready");
          await flush(8);
          await checkFresh();
        } else {
          await flush(8);
          const atClose = live();
          await a.service.close();
          closed = true;
          await flush(8);
          for (const page of atClose) expect(page.lost.map((error) => error.name)).toEqual(["HarnessClosed"]);
        }
        await flush(8);
        // Never told lost while `a` may open again.
        if (!closed) for (const page of pages) expect(page.lost).toEqual([]);
        expect(a.served.listenerCount()).toBe(baseline + (closed ? 0 : live().length));
      }
      if (!closed) {
        if (other) {
          await other.service.close();
          await expect.poll(() => a.service.status().kind).toBe("ready");
          await flush(8);
        }
        await checkFresh();
        const atClose = live();
        await a.service.close();
        await flush(8);
        for (const page of atClose) expect(page.lost.map((error) => error.name)).toEqual(["HarnessClosed"]);
        expect(a.served.listenerCount()).toBe(baseline);
      } else await other?.service.close();
      for (const page of pages) expect(page.lost.length).toBeLessThanOrEqual(1);
    }),
    { numRuns: 40 },
  );
}, 120_000);
