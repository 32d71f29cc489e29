/**
 * A browser worker's door (issue 22 item 2): `serveHarness({ authorize })` asks the app about every call from
 * its page (and from the other tabs); a refused call is NotAuthorized and runs nothing. Comlink over a
 * MessageChannel in Node, as in host-comlink.test.ts.
 */
import { afterEach, expect, it } from "vitest";
import { counterTask } from "../examples/counter-task.ts";
import { exposeHost, type WorkerCaller, wrapHost } from "../src/browser/comlink.ts";
import { HostClient } from "../src/host/client.ts";
import type { CallAtDoor } from "../src/host/doors.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, defineExtension, NotAuthorized } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { sqliteMemoryBackend } from "./support.ts";

const channels: MessageChannel[] = [];
afterEach(() => {
  for (const channel of channels.splice(0)) {
    channel.port1.close();
    channel.port2.close();
  }
});

it("the worker's authorize sees the page's calls with their exposure; what it refuses is NotAuthorized and runs nothing", async () => {
  const served = createHost({
    database: "door",
    openStorage: () => sqliteMemoryBackend.create(),
    harness: {
      registry: createRegistry().install(defineExtension({ name: "example", tasks: [counterTask(() => {})] })),
      clock: createManualClock(1_000),
    },
    now: () => 0,
  });
  const seen: Array<[WorkerCaller, CallAtDoor]> = [];
  const channel = new MessageChannel();
  channels.push(channel);
  // This app lets its page read, but not create tasks or subscribe to reports.
  exposeHost(served.service, channel.port1 as never, (caller, call) => {
    seen.push([caller, call]);
    return call.method !== "createTask" && call.method !== "onReport";
  });
  const client = new HostClient(wrapHost(channel.port2 as never));
  await client.ready();
  await expect(client.createTask("example.counter", { to: 1 })).rejects.toBeInstanceOf(NotAuthorized);
  await expect(client.onReport(() => {})).rejects.toBeInstanceOf(NotAuthorized);
  expect(await client.query("SELECT count(*) AS n FROM tasks")).toEqual([{ n: 0 }]);
  expect((await client.inspect()).tasks).toEqual([]);
  expect(seen.map(([caller, call]) => [caller.from, call.method, call.exposure])).toEqual(
    expect.arrayContaining([
      ["page", "onStatus", "page"],
      ["page", "createTask", "power"],
      ["page", "onReport", "page"],
      ["page", "query", "power"],
    ]),
  );
  // Without an authorize hook the worker serves every call as before.
  const open = new MessageChannel();
  channels.push(open);
  exposeHost(served.service, open.port1 as never);
  const page = new HostClient(wrapHost(open.port2 as never));
  expect(await page.createTask("example.counter", { to: 1 })).toEqual(expect.any(Number));
});
