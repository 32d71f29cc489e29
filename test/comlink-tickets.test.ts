/**
 * Decision 0111: the page's comlink tickets (decision 0107) name one subscribe each, also when two pages' clients wrap
 * the same port. Before, every `wrapHost` numbered its tickets from `subscribe-1`, so one client's `cancel()` gave up
 * the other's wait (and its own stayed at the worker); and the worker forgot a settled ticket even when it named a
 * later subscribe by then. Against a worker host whose watches wait until `come()`.
 */
import * as Comlink from "comlink";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { exposeHost, wrapHost } from "../src/browser/comlink.ts";
import type { HarnessService } from "../src/host/protocol.ts";
import { settled, waitingWatches } from "./support.ts";

const channels: MessageChannel[] = [];
afterEach(() => {
  for (const channel of channels.splice(0)) {
    channel.port1.close();
    channel.port2.close();
  }
});

/** A worker's host whose watches wait for `come()`; `held()` counts the watches it holds (waiting or started). */
function waitingService() {
  const watches = waitingWatches();
  let started = 0;
  const service = {
    watchConversation: (conversationId: number, emit: (value: unknown) => void) =>
      watches.wait(() => {
        started += 1;
        emit({ conversationId });
        let stopped = false;
        return () => {
          if (!stopped) started -= 1;
          stopped = true;
        };
      }),
  } as unknown as HarnessService;
  return {
    service,
    come: () => watches.come(),
    held: () => watches.size + started,
  };
}

function worker() {
  const host = waitingService();
  const channel = new MessageChannel();
  channels.push(channel);
  exposeHost(host.service, channel.port1 as never);
  return { host, port: channel.port2 as never as Comlink.Endpoint };
}

type Pending = Promise<number> & { cancel(): void };

describe("comlink subscribe tickets of two clients on one port (decision 0111)", () => {
  it("0111: one client's cancel() gives up its own wait only; the other's starts when its conversation comes (before: both tickets were subscribe-1, and the cancel gave up the other's)", async () => {
    const { host, port } = worker();
    const first = wrapHost(port);
    const second = wrapHost(port);
    const heard: string[] = [];
    const mine = first.subscribe("watchConversation", [5], () => heard.push("first")) as Pending;
    const theirs = second.subscribe("watchConversation", [5], () => heard.push("second")) as Pending;
    const mineState = settled(mine);
    const theirsState = settled(theirs);
    await expect.poll(() => host.held()).toBe(2);
    mine.cancel();
    await expect.poll(() => mineState.outcome).toBe("NotFound");
    expect(theirsState.outcome).toBeUndefined(); // before: NotFound (its ticket was cancelled), and `mine` still waited
    expect(host.held()).toBe(1);
    host.come();
    await expect.poll(() => theirsState.outcome).toBe("watching");
    expect(heard).toEqual(["second"]);
  });

  it("S8/R9: a subscribe under a ticket that names one not answered yet is refused (InvalidRequest); the first stays cancellable by it", async () => {
    const { host, port } = worker();
    const page = Comlink.wrap<{
      subscribe(method: string, args: unknown[], emit: (value: unknown) => void, ticket?: unknown): Promise<number>;
      cancelSubscribe(ticket: unknown): Promise<void>;
    }>(port);
    const first = settled(
      page.subscribe(
        "watchConversation",
        [5],
        Comlink.proxy(() => {}),
        "t",
      ),
    );
    await expect.poll(() => host.held()).toBe(1);
    await expect(
      page.subscribe(
        "watchConversation",
        [5],
        Comlink.proxy(() => {}),
        "t",
      ),
    ).rejects.toMatchObject({ name: "InvalidRequest" });
    expect(host.held()).toBe(1);
    await page.cancelSubscribe("t");
    await expect.poll(() => first.outcome).toBe("NotFound"); // before: the second took the ticket
    expect(host.held()).toBe(0);
  });

  it("0111 property: clients on one port that watch, cancel and are answered in any order: the worker holds exactly the watches not given up, and each given-up one rejects and hears nothing", async () => {
    const action = fc.oneof(
      fc.record({ kind: fc.constant("watch" as const), client: fc.nat(2) }),
      fc.record({ kind: fc.constant("cancel" as const), which: fc.nat(20) }),
      fc.constant({ kind: "come" as const }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(action, { maxLength: 10 }), async (actions) => {
        const { host, port } = worker();
        const clients = [wrapHost(port), wrapHost(port), wrapHost(port)];
        const watches: Array<{ promise: Pending; state: ReturnType<typeof settled>; heard: number; gone: boolean }> = [];
        for (const step of actions) {
          if (step.kind === "watch") {
            const watch = { heard: 0, gone: false } as (typeof watches)[number];
            watch.promise = clients[step.client]!.subscribe("watchConversation", [5], () => void (watch.heard += 1)) as Pending;
            watch.state = settled(watch.promise);
            watches.push(watch);
          } else if (step.kind === "cancel") {
            const watch = watches[step.which % Math.max(1, watches.length)];
            if (!watch || watch.gone) continue;
            watch.gone = true;
            watch.promise.cancel();
          } else host.come();
          // Each step reaches the worker before the next (as a page's clicks do).
          await new Promise((resolve) => setTimeout(resolve, 2));
        }
        const kept = watches.filter((watch) => !watch.gone);
        await expect.poll(() => host.held()).toBe(kept.length);
        host.come();
        for (const watch of kept) await expect.poll(() => watch.state.outcome).toBe("watching");
        for (const watch of watches.filter((each) => each.gone && each.state.outcome !== "watching")) {
          await expect.poll(() => watch.state.outcome).toBe("NotFound");
          expect(watch.heard).toBe(0);
        }
        expect(host.held()).toBe(kept.length);
      }),
      { numRuns: 25 },
    );
  });
});
