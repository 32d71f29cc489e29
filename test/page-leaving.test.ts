import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { followObject } from "../src/browser/follow.ts";
import type { LeavingTicket } from "../src/browser/follow-options.ts";
import { LEAVING_SAID, LEAVING_TICKET, LeavingSocket, pageLeaves, saidIn, ticketIn } from "../src/browser/leaving.ts";
import type { SocketLike } from "../src/browser/socket.ts";
import { LEAVING_GRACE_MS } from "../src/follow/arbiter.ts";
import { createRegistry, Harness } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { memoryObjectEnd, socketTo } from "./follow-support.ts";
import { ctx, flush } from "./support.ts";

// Decision 0101, the tab's side: the worker tells its page where the object stands while it holds the lease (a
// `LeavingTicket` at each acknowledgement), and the page's own socket says `lease.leaving(place, epoch, A)` at
// `pagehide`, so a close whose worker never gets its next task still hands the lease over (after the object's grace)
// instead of waiting out the lease. Before: no ticket, no page socket; the object waited for the lease's expiry.

async function tabHoldingLease() {
  const clock = createManualClock(1_000);
  const object = await memoryObjectEnd(clock);
  const worker = socketTo(object.end, "worker");
  const follow = followObject({ url: "ws://object/follow?token=t", connect: () => worker.socket, place: "tab" }, clock);
  const tickets: Array<LeavingTicket | undefined> = [];
  follow.onLeavingTicket((ticket) => tickets.push(ticket));
  setTimeout(() => worker.opened(), 0);
  const tab = await Harness.open(
    await openSqliteStorage({ vfs: "memory" }),
    { registry: createRegistry(), clock, lease: follow.lease, serverCalls: follow.serverCalls },
    ctx,
  );
  follow.attach(tab);
  return { clock, object, follow, tab, tickets };
}

describe("the page's own leaving (S4, decision 0101)", () => {
  it("pageLeaves (the page client's pagehide): its lease.leaving goes out, then its worker is posted the word, then leave() — no word when the leaving could not go out (decision 0113 after review)", async () => {
    const { object, follow, tab, tickets } = await tabHoldingLease();
    await tab.root(ctx, { agent: { model: "faux/faux-1" } });
    const head = tab.lease!.position;
    await expect.poll(() => tickets.at(-1)?.position).toBe(head);
    const order: unknown[] = [];
    const worker = { postMessage: (message: unknown) => void order.push(message) };
    const leave = () => {
      order.push("leave");
      return Promise.reject(new Error("the worker is gone")); // swallowed: a closing page has no one to tell
    };
    const page = socketTo(object.end, "page");
    const leaving = new LeavingSocket(() => page.socket);
    leaving.told(tickets.at(-1)!);
    pageLeaves(leaving, worker, leave); // its socket's hello not answered yet: nothing went out, no word
    expect(order).toEqual(["leave"]);
    page.opened();
    await expect.poll(() => leaving.ready).toBe(true);
    order.length = 0;
    pageLeaves(leaving, worker, leave);
    expect(order).toEqual([{ [LEAVING_SAID]: leaving.said }, "leave"]);
    expect(saidIn(order[0])?.epoch).toBe(tab.lease!.epoch);
    await flush(5);
    expect(object.record()).toMatchObject({ holder: "tab", epoch: tab.lease!.epoch, leaving: head });
    follow.close();
    await tab.close(ctx).catch(() => {});
  });

  it("the worker tells its page the object's acknowledged head and its epoch; the page's lease.leaving alone hands the lease over after the grace", async () => {
    const { clock, object, follow, tab, tickets } = await tabHoldingLease();
    await tab.root(ctx, { agent: { model: "faux/faux-1" } });
    const head = tab.lease!.position;
    await expect.poll(() => tickets.at(-1)?.position).toBe(head);
    // Before: no ticket at all (followObject had no onLeavingTicket).
    expect(tickets.at(-1)).toEqual({ url: "ws://object/follow?token=t", place: "tab", epoch: tab.lease!.epoch, position: head });

    const page = socketTo(object.end, "page");
    const leaving = new LeavingSocket(() => page.socket);
    leaving.told(tickets.at(-1)!);
    expect(leaving.leave()).toBe(false); // no hello answered yet: nothing goes out
    page.opened();
    await expect.poll(() => leaving.ready).toBe(true);
    expect(leaving.leave()).toBe(true);
    await flush(5);
    // The worker never gets its task (closed with its page): its release never comes.
    follow.close();
    expect(object.record()).toMatchObject({ holder: "tab", epoch: tab.lease!.epoch, leaving: head });
    clock.advance(LEAVING_GRACE_MS + 1);
    await object.end.checkExpiry();
    const taken = await object.end.harness!;
    expect(taken.lease).toMatchObject({ place: "object", epoch: tab.lease!.epoch + 1 });
    expect(object.record().holder).toBe("object");
    await taken.close(ctx);
    await tab.close(ctx);
  });

  it("the worker's leave withdraws the ticket (a page that stays never says it is leaving after), and a page whose ticket is withdrawn closes its socket", async () => {
    const { object, follow, tab, tickets } = await tabHoldingLease();
    await tab.root(ctx, { agent: { model: "faux/faux-1" } });
    await expect.poll(() => tickets.at(-1)?.position).toBe(tab.lease!.position);
    const page = socketTo(object.end, "page");
    const leaving = new LeavingSocket(() => page.socket);
    leaving.told(tickets.at(-1)!);
    void follow.leave().catch(() => {});
    expect(tickets).toContain(undefined);
    leaving.told(null);
    expect(page.isClosed()).toBe(true);
    expect(leaving.leave()).toBe(false);
    follow.close();
    await tab.close(ctx).catch(() => {});
  });

  it("an object of another wire version: the hello fails, the page sends no leaving", async () => {
    const sent: string[] = [];
    const listeners: Record<string, Array<(event?: { data: unknown }) => void>> = { open: [], message: [], close: [], error: [] };
    const socket = {
      send: (frame: string) => {
        sent.push(frame);
        const { id } = JSON.parse(frame) as { id: string };
        const answer = {
          type: "answer",
          id,
          error: { name: "FollowVersionMismatch", message: "tab 6, object 7", details: { tab: 6, object: 7 } },
        };
        setTimeout(() => {
          for (const listener of listeners.message!) listener({ data: JSON.stringify(answer) });
        }, 0);
      },
      close() {},
      addEventListener: (type: string, listener: (event?: { data: unknown }) => void) => void listeners[type]!.push(listener),
    } as SocketLike;
    const leaving = new LeavingSocket(() => socket);
    leaving.told({ url: "ws://object/follow", place: "tab", epoch: 3, position: 4 });
    for (const listener of listeners.open!) listener();
    await flush(5);
    expect(leaving.ready).toBe(false);
    expect(leaving.leave()).toBe(false);
    expect(sent.map((frame) => JSON.parse(frame).method)).toEqual(["hello"]);
  });

  it("property: ticketIn takes any message the page's worker posts without throwing: a ticket only when well-formed (fast-check)", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.jsonValue(),
          fc.jsonValue().map((value) => ({ [LEAVING_TICKET]: value })),
        ),
        (data) => {
          const ticket = ticketIn(data);
          if (ticket === undefined || ticket === null) return;
          expect(typeof ticket.url).toBe("string");
          expect(typeof ticket.place).toBe("string");
          expect(Number.isSafeInteger(ticket.epoch)).toBe(true);
          expect(Number.isSafeInteger(ticket.position) && ticket.position >= 0).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
    expect(ticketIn({ [LEAVING_TICKET]: { url: "u", place: "p", epoch: 1, position: 2 } })).toEqual({
      url: "u",
      place: "p",
      epoch: 1,
      position: 2,
    });
    expect(ticketIn({ [LEAVING_TICKET]: null })).toBeNull();
    expect(ticketIn({ id: "comlink" })).toBeUndefined();
  });
});
