import * as Comlink from "comlink";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { counterTask } from "../examples/counter-task.ts";
import { exposeHost } from "../src/browser/comlink.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, defineExtension } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { hostileJson, sqliteMemoryBackend } from "./support.ts";

// Decision 0107 gave the page two things to send the worker over comlink: a ticket beside each subscribe and
// `cancelSubscribe(ticket)`. Both arrive from the page, so they are hostile until checked: whatever the page sends as a
// ticket, the worker neither throws nor gives up a subscription that ticket does not name, and the next call is served.

const channels: MessageChannel[] = [];
afterEach(() => {
  for (const channel of channels.splice(0)) {
    channel.port1.close();
    channel.port2.close();
  }
});

type Exposed = {
  subscribe(method: string, args: unknown[], emit: (event: unknown) => void, ticket?: unknown): Promise<number>;
  unsubscribe(id: number): Promise<void>;
  cancelSubscribe(ticket: unknown): Promise<void>;
};

describe("comlink's subscribe tickets from a page (decision 0107, R9)", () => {
  it("S8/R9 property: any ticket (hostile JSON, strings) beside a subscribe or in cancelSubscribe changes nothing it does not name; the page's next subscribe is served", async () => {
    const served = createHost({
      database: "tickets",
      openStorage: () => sqliteMemoryBackend.create(),
      harness: {
        registry: createRegistry().install(defineExtension({ name: "example", tasks: [counterTask(() => {})] })),
        clock: createManualClock(1_000),
      },
      now: () => 0,
    });
    const channel = new MessageChannel();
    channels.push(channel);
    exposeHost(served.service, channel.port1 as never);
    const page = Comlink.wrap<Exposed>(channel.port2 as never);
    await served.ready;
    const conversation = await served.service.rootConversation();
    // One watch the page keeps, under its own ticket, answered before the random ones arrive.
    const kept = await page.subscribe(
      "watchConversation",
      [conversation],
      Comlink.proxy(() => {}),
      "kept",
    );
    const baseline = served.listenerCount();
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.string({ maxLength: 12 }), fc.constant("kept"), hostileJson(2)), async (ticket) => {
        // A cancel naming anything (the kept watch's own ticket too: it was answered, so the ticket is spent).
        await expect(page.cancelSubscribe(ticket)).resolves.toBeUndefined();
        expect(served.listenerCount()).toBe(baseline);
        // A subscribe carrying that value as its ticket is served as any other and leaves nothing once unsubscribed.
        const id = await page.subscribe(
          "watchConversation",
          [conversation],
          Comlink.proxy(() => {}),
          ticket,
        );
        expect(served.listenerCount()).toBe(baseline + 1);
        await page.unsubscribe(id);
        await expect.poll(() => served.listenerCount()).toBe(baseline);
      }),
      { numRuns: 40, seed: 107 },
    );
    await page.unsubscribe(kept);
    await expect.poll(() => served.listenerCount()).toBe(baseline - 1);
  }, 30_000);
});
