/**
 * Decision 0117, later (its review's finding 1): a subscribe carried over a drop that was answered with what passes by
 * itself (AuthorizeFailed) waits, `unserved`; refused on its re-ask (NotAuthorized), its wait ends with it. Before, the
 * socket's `onState` stayed `unserved` and the page `reconnecting` on a live socket, for good.
 */
import { describe, expect, it } from "vitest";
import { HarnessClient } from "../src/browser/client.ts";
import { type SocketState, socketEndpoint } from "../src/browser/socket.ts";
import { AuthorizeFailed, NotAuthorized } from "../src/errors.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { manualTimer, scriptedSockets, settle } from "./socket-support.ts";

/** A host whose answer per method is scripted: `ok`, `hang` (never answers), `retry` (AuthorizeFailed), `refuse`. */
function scriptedHost() {
  const answer: Record<string, string> = { onStatus: "ok", watchConversation: "hang" };
  const asked: Record<string, number> = {};
  let next = 0;
  const endpoint: HostEndpoint = {
    call: async () => "done",
    subscribe: async (method, _args, emit) => {
      asked[method] = (asked[method] ?? 0) + 1;
      const now = answer[method] ?? "ok";
      if (now === "retry") throw new AuthorizeFailed(method);
      if (now === "refuse") throw new NotAuthorized(method, "not yours.");
      if (method === "onStatus") emit({ kind: "ready", recovery: {} });
      if (now === "hang") return new Promise<number>(() => {});
      return ++next;
    },
    unsubscribe: () => {},
  };
  return { answer, asked, endpoint };
}

describe("a carried subscribe that waited and is then refused ends its wait (decision 0117, later)", () => {
  it("0117 later: socket: carried, AuthorizeFailed (unserved), then NotAuthorized on the re-ask: its caller is refused and onState hears open (before: unserved for good)", async () => {
    const host = scriptedHost();
    const sockets = scriptedSockets(host.endpoint);
    const timer = manualTimer();
    const states: SocketState[] = [];
    const socket = socketEndpoint(sockets.connect, {
      retryMs: 100,
      random: () => 1,
      setTimer: (fire, ms) => timer.setTimer(fire, ms),
      clearTimer: (handle) => timer.clearTimer(handle),
      onState: (state) => states.push(state),
    });
    await settle();
    let settled: string | undefined;
    socket
      .subscribe("watchConversation", [1], () => {})
      .then(
        () => (settled = "answered"),
        (error: Error) => (settled = error.name),
      );
    await settle();
    host.answer.watchConversation = "retry";
    sockets.drop();
    await settle();
    await timer.fire(); // the reconnect: AuthorizeFailed, it waits
    expect(states.at(-1)).toEqual({ state: "unserved", attempt: 1, retryInMs: 100 });
    host.answer.watchConversation = "refuse";
    await timer.fire(); // the re-ask: refused
    expect(settled).toBe("NotAuthorized");
    expect(timer.pending).toBe(0);
    expect(states.at(-1)).toEqual({ state: "open" });
    expect(host.asked.watchConversation).toBe(3); // asked nowhere again
    socket.close();
  });

  it("0117 later: HarnessClient: a view carried over a drop, unserved, then refused: the view is refused and the status is ready again (before: reconnecting for good)", async () => {
    const host = scriptedHost();
    const sockets = scriptedSockets(host.endpoint);
    const client = new HarnessClient({ url: "ws://x.test/h", connect: () => sockets.connect() });
    await client.ready();
    let settled: string | undefined;
    client
      .watchConversationUpdates(1, () => {})
      .then(
        () => (settled = "answered"),
        (error: Error) => (settled = error.name),
      );
    await settle();
    host.answer.watchConversation = "retry";
    sockets.drop();
    await expect.poll(() => host.asked.watchConversation, { timeout: 5000 }).toBe(2); // the reconnect's ask
    await settle();
    expect(client.status.kind).toBe("reconnecting");
    host.answer.watchConversation = "refuse";
    await expect.poll(() => settled, { timeout: 5000 }).toBe("NotAuthorized");
    await expect.poll(() => client.status.kind, { timeout: 3000 }).toBe("ready");
    client.terminate();
  });
});
