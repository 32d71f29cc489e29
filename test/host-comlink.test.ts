import { afterEach, describe, expect, it } from "vitest";
import { counterTask } from "../examples/counter-task.ts";
import { exposeHost, wrapHost } from "../src/browser/comlink.ts";
import { HostClient } from "../src/host/client.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, DurableError, defineExtension, QueryNotReadOnly, UnknownTaskKind } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { sqliteMemoryBackend } from "./support.ts";

// The browser adapter's comlink transport in Node: the two ends of a MessageChannel stand in for the worker
// and its page (the same comlink, the same transfer handlers; e2e/host.e2e.ts runs it in Chromium).

const channels: MessageChannel[] = [];
afterEach(() => {
  for (const channel of channels.splice(0)) {
    channel.port1.close();
    channel.port2.close();
  }
});

function connected() {
  const served = createHost({
    database: "comlink",
    openStorage: () => sqliteMemoryBackend.create(),
    harness: {
      registry: createRegistry().install(defineExtension({ name: "example", tasks: [counterTask(() => {})] })),
      clock: createManualClock(1_000),
    },
    methods: {
      throwsText: () => {
        throw "plain text";
      },
    },
    now: () => 0,
  });
  const channel = new MessageChannel();
  channels.push(channel);
  const endpoint = exposeHost(served.service, channel.port1 as never);
  const client = new HostClient(wrapHost(channel.port2 as never));
  return { served, endpoint, client };
}

describe("the host over comlink", () => {
  it("rebuilds the library's error classes, with their fields, on the other side", async () => {
    const { client } = connected();
    await client.ready();
    const unknownKind = await client.createTask("nope", {}).catch((error: unknown) => error);
    expect(unknownKind).toBeInstanceOf(UnknownTaskKind);
    expect(unknownKind).toBeInstanceOf(DurableError);
    expect(unknownKind).toMatchObject({ name: "UnknownTaskKind", kind: "nope" });
    await expect(client.query("DROP TABLE tasks")).rejects.toBeInstanceOf(QueryNotReadOnly);
    // What is not an Error is left to comlink: thrown as it was.
    expect(await client.call("throwsText").catch((error: unknown) => error)).toBe("plain text");
  });

  it("leaves no listener and no subscription after 1,000 subscribe/unsubscribe cycles", async () => {
    const { served, endpoint, client } = connected();
    await client.ready();
    const conversation = await client.rootConversation();
    const baseline = served.listenerCount();
    for (let cycle = 0; cycle < 1_000; cycle += 1) {
      const stops = await Promise.all([
        client.onReport(() => {}),
        client.watchTasks(() => {}),
        client.watchConversation(conversation, () => {}),
      ]);
      for (const stop of stops) stop();
    }
    await client.inspect(); // answered after every unsubscribe before it
    expect(served.listenerCount()).toBe(baseline);
    expect(endpoint.subscriptions).toBe(1); // the client's own status subscription
  });
});
