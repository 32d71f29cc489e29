/**
 * Decision 0117, later (its review's finding 7): a worker's page whose own status subscription fails at its first ask
 * (the worker's authorize hook throws for `onStatus`: AuthorizeFailed; or refuses it: NotAuthorized) shows `failed`
 * with that error, as a page over a socket does. Before, the tabs' endpoint swallowed the rejection and the page stayed
 * `starting` for good (`ready()` never settled).
 */
import { afterEach, expect, it } from "vitest";
import { exposeHost, wrapHost } from "../src/browser/comlink.ts";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { AuthorizeFailed, NotAuthorized } from "../src/errors.ts";
import { HostClient } from "../src/host/client.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, MemoryStorage } from "../src/index.ts";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

function workerPage(refuse: () => never) {
  const served = createHost({
    database: "d",
    openStorage: async () => new MemoryStorage(),
    harness: { registry: createRegistry() },
    now: () => 0,
  });
  const channel = new MessageChannel();
  exposeHost(served.service, channel.port1 as never, {
    authorize: (_caller, call) => (call.method === "onStatus" ? refuse() : true),
  });
  const client = new HostClient(tabsEndpoint(wrapHost(channel.port2 as never)));
  cleanups.push(async () => {
    client.close();
    channel.port1.close();
    channel.port2.close();
    await served.service.close();
  });
  return client;
}

it("0117 later: a worker's page whose authorize hook throws for its status subscription: failed with AuthorizeFailed (before: starting for good)", async () => {
  const client = workerPage(() => {
    throw new Error("the permission store is down");
  });
  await expect(client.ready()).rejects.toBeInstanceOf(AuthorizeFailed);
  expect(client.status).toMatchObject({ kind: "failed", error: { name: "AuthorizeFailed" } });
  expect(JSON.stringify(client.status)).not.toContain("permission store"); // the hook's message stays in the worker
});

it("0117 later: a worker's page whose authorize hook refuses its status subscription: failed with NotAuthorized (before: starting for good)", async () => {
  const client = workerPage(() => {
    throw new NotAuthorized("onStatus", "not yours.");
  });
  await expect(client.ready()).rejects.toBeInstanceOf(NotAuthorized);
  expect(client.status).toMatchObject({ kind: "failed", error: { name: "NotAuthorized" } });
});
