/**
 * Decision 0117, later (its review's finding 7): a worker's page whose own status subscription is refused at its first
 * ask (the worker's authorize hook refuses `onStatus`: NotAuthorized) shows `failed` with that error, as a page over a
 * socket does. Before, the tabs' endpoint swallowed the rejection and the page stayed `starting` for good (`ready()`
 * never settled). Decision 0123: one the hook fails (it throws: AuthorizeFailed) is asked again after a backoff, the page
 * `reconnecting` meanwhile (0117 later made it `failed` while that worker lived: nothing asked again).
 */
import { afterEach, expect, it } from "vitest";
import { exposeHost, wrapHost } from "../src/browser/comlink.ts";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { NotAuthorized } from "../src/errors.ts";
import { HostClient } from "../src/host/client.ts";
import { createHost } from "../src/host/host.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createRegistry, MemoryStorage } from "../src/index.ts";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

function workerPage(refuse: () => never, mode = { refusing: true, asked: 0 }) {
  const served = createHost({
    database: "d",
    openStorage: async () => new MemoryStorage(),
    harness: { registry: createRegistry() },
    now: () => 0,
  });
  const channel = new MessageChannel();
  exposeHost(served.service, channel.port1 as never, {
    authorize: (_caller, call) => {
      if (call.method !== "onStatus") return true;
      mode.asked++;
      return mode.refusing ? refuse() : true;
    },
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

it("0123: a worker's page whose authorize hook throws for its status subscription: reconnecting, asked again after a backoff, ready once the hook answers (0117 later: failed while that worker lived; before it: starting for good)", async () => {
  const mode = { refusing: true, asked: 0 };
  const client = workerPage(() => {
    throw new Error("the permission store is down");
  }, mode);
  const told: HarnessStatus[] = [];
  client.onStatus((status) => told.push(status));
  await expect.poll(() => client.status.kind, { timeout: 5000 }).toBe("reconnecting");
  expect(client.status).toMatchObject({ kind: "reconnecting", attempt: 1, retryInMs: 500, error: { name: "AuthorizeFailed" } }); // why it waits (0123's review, L3)
  expect(JSON.stringify(told)).not.toContain("permission store"); // the hook's message stays in the worker
  await expect.poll(() => mode.asked, { timeout: 5000 }).toBe(2); // asked again on the same worker: still failing
  await expect.poll(() => client.status, { timeout: 5000 }).toMatchObject({ kind: "reconnecting", attempt: 2, retryInMs: 1000 });
  mode.refusing = false;
  await client.ready();
  expect(mode.asked).toBe(3);
  expect(told.map((status) => (status.kind === "reconnecting" ? `reconnecting ${status.attempt}` : status.kind))).toEqual([
    "starting",
    "reconnecting 1",
    "reconnecting 2",
    "ready",
  ]);
});

it("0117 later: a worker's page whose authorize hook refuses its status subscription: failed with NotAuthorized (before: starting for good)", async () => {
  const client = workerPage(() => {
    throw new NotAuthorized("onStatus", "not yours.");
  });
  await expect(client.ready()).rejects.toBeInstanceOf(NotAuthorized);
  expect(client.status).toMatchObject({ kind: "failed", error: { name: "NotAuthorized" } });
});
