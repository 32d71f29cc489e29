/**
 * Decision 0117, later (item 3 of its open seams): a host whose reopen cannot open a harness at all (a rebuild whose
 * storage no longer opens) ends every page's view with the open's error and says `failed`, at once. Before, the rebinds
 * were skipped when the open threw: the views stayed bound to the closed harness, silent, and the status stayed at
 * `recovering` — until a reconnect or a reload.
 */
import { describe, expect, it } from "vitest";
import { socketEndpoint } from "../src/browser/socket.ts";
import { HostClient } from "../src/host/client.ts";
import { hostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createRegistry, MemoryStorage, type Storage } from "../src/index.ts";
import { scriptedSockets, settle } from "./socket-support.ts";

/** A host whose rebuild leaves a storage that no longer opens (every call rejects "the disk is gone"). */
async function hostWhoseReopenFails() {
  const inner = new MemoryStorage();
  let broken = false;
  const storage = new Proxy({} as Storage, {
    get: (_, key) => {
      const value = (inner as unknown as Record<PropertyKey, unknown>)[key];
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (broken) throw new Error("the disk is gone");
        return (value as (...args: unknown[]) => unknown).apply(inner, args);
      };
    },
  });
  let asked: (() => void) | undefined;
  const host = createHost({
    database: "db",
    openStorage: async () => storage,
    harness: { registry: createRegistry(), resume: true },
    rebuild: {
      when: (listener) => void (asked = listener),
      run: async () => {
        broken = true;
      },
    },
    now: () => 0,
  });
  await host.ready;
  const statuses: HarnessStatus[] = [];
  host.service.onStatus((status) => statuses.push(status));
  const rebuild = async () => {
    asked!();
    await expect.poll(() => statuses.at(-1)?.kind).toBe("failed");
    await settle();
  };
  return { host, rebuild, statuses };
}

describe("a reopen that opens nothing ends the page's views (decision 0117, later)", () => {
  it("0117 later (3): the host's own watches — a conversation watch and a page tools' watch — are told lost once with the open's error, the status is failed, the host holds neither (before: silent, bound to the closed harness, status recovering)", async () => {
    const { host, rebuild, statuses } = await hostWhoseReopenFails();
    const a = await host.service.createConversation();
    const watchLost: Error[] = [];
    await host.service.watchConversation(
      a,
      () => {},
      (error) => watchLost.push(error),
    );
    const toolsLost: Error[] = [];
    await host.service.watchPageCalls(
      a,
      { pageId: "page-1", tools: ["pick"] },
      () => {},
      (error) => toolsLost.push(error),
    );
    const base = host.listenerCount();
    await rebuild();
    expect(watchLost.map((error) => error.message)).toEqual(["the disk is gone"]);
    expect(toolsLost.map((error) => error.message)).toEqual(["the disk is gone"]);
    expect(statuses.at(-1)).toMatchObject({ kind: "failed", error: { message: "the disk is gone" } });
    expect(host.listenerCount()).toBe(base - 1); // the conversation watch (page tools' watches are not counted)
  });

  it("0117 later (3): over a page's socket: the view is lost and the page tools' onLost told, the client's status failed, at once (before: the view silent, the status recovering)", async () => {
    const { host, rebuild } = await hostWhoseReopenFails();
    const a = await host.service.createConversation();
    const sockets = scriptedSockets(hostEndpoint(host.service));
    const socket = socketEndpoint(sockets.connect, { retryMs: 0 });
    const client = new HostClient(socket, "page-1");
    await client.ready();
    const view = await client.openConversation(a);
    const viewLost: Error[] = [];
    view.onLost((error) => viewLost.push(error));
    const toolsLost: Error[] = [];
    await client.providePageTools(a, { pick: (async () => ({ content: [] })) as never }, { onLost: (error) => toolsLost.push(error) });
    await settle();
    await rebuild();
    await settle();
    expect(viewLost.map((error) => error.message)).toEqual(["the disk is gone"]);
    expect(view.lost).toBe(viewLost[0]);
    expect(toolsLost).toHaveLength(1);
    expect(client.status).toMatchObject({ kind: "failed", error: { message: "the disk is gone" } });
    socket.close();
  });
});
