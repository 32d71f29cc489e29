import { expect } from "vitest";
import type { SocketLike } from "../src/browser/socket.ts";
import type { ObjectEnd } from "../src/follow/object-end.ts";
import { HostClient } from "../src/host/client.ts";
import { hostEndpoint } from "../src/host/endpoint.ts";
import { type ClientMessage, type HostMessage, messageEndpoint, serveMessages } from "../src/host/messages.ts";
import type { HarnessService } from "../src/host/protocol.ts";
import type { Storage, ToolResultEntryPayload } from "../src/index.ts";

// Page tools across a follow link (decision 0044): the pieces both sides' tests share.

/** An in-memory socket from a tab's follow link to `end`, each frame on a later turn; `close()` is the socket's close. */
export function socketTo(end: ObjectEnd, sockets: Array<{ close(): void }> = []): SocketLike {
  const listeners: Record<string, Array<(event?: { data: unknown }) => void>> = { open: [], message: [], close: [], error: [] };
  let open = true;
  const connection = {};
  const toTab = (frame: string) =>
    setTimeout(() => {
      if (open) for (const listener of listeners.message!) listener({ data: frame });
    }, 0);
  setTimeout(() => {
    for (const listener of listeners.open!) listener();
  }, 0);
  const socket = {
    send: (frame: string) =>
      setTimeout(() => {
        if (open) void end.receive(frame, toTab, () => true, connection);
      }, 0),
    close() {
      if (!open) return;
      open = false;
      end.drop(connection);
      for (const listener of listeners.close!) listener();
    },
    addEventListener(type: string, listener: (event?: { data: unknown }) => void) {
      listeners[type]!.push(listener);
    },
  };
  sockets.push(socket);
  return socket as SocketLike;
}

/** A page connected to `service` by messages (as a page reaches its worker, or a socket its object). */
export function pageOf(service: HarnessService, pageId: string): HostClient & { disconnect(): void } {
  let toPage: (message: HostMessage) => void = () => {};
  const connection = serveMessages(hostEndpoint(service), (message) => queueMicrotask(() => toPage(structuredClone(message))));
  const side = messageEndpoint((message: ClientMessage) => queueMicrotask(() => connection.receive(structuredClone(message))));
  toPage = side.receive;
  return Object.assign(new HostClient(side.endpoint, pageId), { disconnect: () => connection.close() });
}

/** The tool results in the conversation as a tab's host serves it. */
export async function resultsAt(service: HarnessService, conversationId: number): Promise<ToolResultEntryPayload[]> {
  const page = await service.conversationEntries(conversationId, Number.MAX_SAFE_INTEGER, 100);
  return page.entries.filter((entry) => entry.kind === "pi.tool-result").map((entry) => entry.payload as unknown as ToolResultEntryPayload);
}

/** The tab's copy caught up with the object's waiting call (a page provides tools for a conversation it shows). */
export async function sees(service: HarnessService): Promise<void> {
  await expect.poll(async () => (await service.inspect()).pageCalls.map((call) => call.callId), { timeout: 5_000 }).toEqual(["call_1"]);
}

/** `rebuild` with each run's outcome — "rebuilt", or the error's name — pushed to `outcomes`; the rest passed on. */
export function recordingRebuild<R extends { run(storage: Storage): Promise<void> }>(rebuild: R, outcomes: string[]): R {
  return {
    ...rebuild,
    run: (target: Storage) =>
      rebuild.run(target).then(
        () => void outcomes.push("rebuilt"),
        (error: unknown) => {
          outcomes.push((error as Error).name);
          throw error;
        },
      ),
  };
}

/**
 * The object takes over a counting tab: the tab's counter reaches 3, the tab leaves, the object runs it; `closeTab`
 * then drops the tab's link, and the object counts on until its copy's log is trimmed past position 2 (so a new
 * device's copy cannot follow it and must rebuild). Returns the counter's task id.
 */
export async function objectTakesOverTheCount(
  service: HarnessService,
  end: ObjectEnd,
  copy: Pick<Storage, "readLog">,
  closeTab: () => void,
): Promise<number> {
  const taskId = await service.createTask("example.counter", { to: 1_000 });
  await expect
    .poll(async () => ((await service.getTask(taskId))?.state as { checkpoint?: { n: number } } | undefined)?.checkpoint?.n ?? 0, {
      timeout: 5_000,
    })
    .toBeGreaterThanOrEqual(3);
  void service.leave();
  await expect.poll(() => end.harness !== undefined, { timeout: 5_000 }).toBe(true);
  closeTab();
  await expect.poll(async () => ((await copy.readLog!(0, 1))[0]?.fence.position ?? 0) > 2, { timeout: 10_000 }).toBe(true);
  return taskId;
}
