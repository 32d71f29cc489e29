/**
 * Decision 0117, later (its review's finding 1): a subscribe carried over a drop that was answered with what passes by
 * itself (AuthorizeFailed) waits, `unserved`; refused on its re-ask (NotAuthorized), its wait ends with it. Before, the
 * socket's `onState` stayed `unserved` and the page `reconnecting` on a live socket, for good.
 */
import { describe, expect, it } from "vitest";
import { HarnessClient } from "../src/browser/client.ts";
import { type SocketState, socketEndpoint } from "../src/browser/socket.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { answeringHost, manualTimer, scriptedSockets, settle } from "./socket-support.ts";

/** Why an unserved subscription waits (decision 0123's review, L3): the host's answer, its hook threw. */
const failedAsk = expect.objectContaining({ name: "AuthorizeFailed" });

describe("a carried subscribe that waited and is then refused ends its wait (decision 0117, later)", () => {
  it("0117 later: socket: carried, AuthorizeFailed (unserved), then NotAuthorized on the re-ask: its caller is refused and onState hears open (before: unserved for good)", async () => {
    const host = answeringHost({ onStatus: "ok", watchConversation: "hang" }, "not yours.");
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
    expect(states.at(-1)).toEqual({ state: "unserved", attempt: 1, retryInMs: 100, error: failedAsk });
    host.answer.watchConversation = "refuse";
    await timer.fire(); // the re-ask: refused
    expect(settled).toBe("NotAuthorized");
    // Its caller heard the refusal before onState hears the wait's end (decision 0117, review seams2): `open` a task later.
    expect(states.at(-1)).toEqual({ state: "unserved", attempt: 1, retryInMs: 100, error: failedAsk });
    await timer.fire();
    expect(timer.pending).toBe(0);
    expect(states.at(-1)).toEqual({ state: "open" });
    expect(host.asked.watchConversation).toBe(3); // asked nowhere again
    socket.close();
  });

  it("0117 later: HarnessClient: a view carried over a drop, unserved, then refused: the view is refused and the status is ready again (before: reconnecting for good)", async () => {
    const host = answeringHost({ onStatus: "ok", watchConversation: "hang" }, "not yours.");
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

const show = (status: HarnessStatus) =>
  status.kind === "failed" ? `failed:${status.error.name}` : status.kind === "reconnecting" ? "reconnecting" : status.kind;
/** What listeners heard after the last `reconnecting`. */
const afterReconnecting = (seen: string[]) => seen.slice(seen.lastIndexOf("reconnecting") + 1);

describe("a status subscription refused after its wait tells `failed` once, never the stale status first (decision 0117, review seams2)", () => {
  it("0117 review seams2 (B): the status subscription carried over a drop, unserved, then refused: `failed` once, no `ready` flash, a ready() called meanwhile rejects (before: ready, then failed; ready() resolved)", async () => {
    const host = answeringHost({ onStatus: "ok", watchConversation: "hang" }, "not yours.");
    host.answer.onStatus = "hang"; // it tells `ready`, its answer never comes: carried over the drop
    const sockets = scriptedSockets(host.endpoint);
    const client = new HarnessClient({ url: "ws://x.test/h", connect: () => sockets.connect() });
    const seen: string[] = [];
    client.onStatus((status) => seen.push(show(status)));
    await client.ready();
    host.answer.onStatus = "retry";
    sockets.drop();
    await expect.poll(() => host.asked.onStatus, { timeout: 5000 }).toBe(2); // the reconnect: AuthorizeFailed, it waits
    await settle();
    let ready = "pending";
    client.ready().then(
      () => (ready = "resolved"),
      (error: Error) => (ready = `rejected ${error.name}`),
    );
    host.answer.onStatus = "refuse";
    await expect.poll(() => host.asked.onStatus, { timeout: 5000 }).toBe(3);
    await expect.poll(() => ready, { timeout: 3000 }).not.toBe("pending");
    await new Promise((resolve) => setTimeout(resolve, 20)); // the socket's deferred `open`, if any, is told
    expect(ready).toBe("rejected NotAuthorized");
    expect(afterReconnecting(seen)).toEqual(["failed:NotAuthorized"]);
    expect(show(client.status)).toBe("failed:NotAuthorized");
    client.terminate();
  });

  it("0117 review seams2 (B′): the answered status subscription, AuthorizeFailed at a reconnect (unserved), then refused on its re-ask: `failed` once, a ready() called meanwhile rejects (before: ready flashed and ready() resolved)", async () => {
    const host = answeringHost({ onStatus: "ok", watchConversation: "hang" }, "not yours.");
    const sockets = scriptedSockets(host.endpoint);
    const client = new HarnessClient({ url: "ws://x.test/h", connect: () => sockets.connect() });
    const seen: string[] = [];
    client.onStatus((status) => seen.push(show(status)));
    await client.ready();
    await settle(); // its answer arrives too: the refusedAgain path
    host.answer.onStatus = "retry";
    sockets.drop();
    await expect.poll(() => host.asked.onStatus, { timeout: 5000 }).toBe(2);
    await settle();
    let ready = "pending";
    client.ready().then(
      () => (ready = "resolved"),
      (error: Error) => (ready = `rejected ${error.name}`),
    );
    host.answer.onStatus = "refuse";
    await expect.poll(() => host.asked.onStatus, { timeout: 5000 }).toBe(3);
    await expect.poll(() => ready, { timeout: 3000 }).not.toBe("pending");
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(ready).toBe("rejected NotAuthorized");
    expect(afterReconnecting(seen)).toEqual(["failed:NotAuthorized"]);
    client.terminate();
  });

  it("0117 review seams2 (A): refused, asked again and carried over a drop, unserved, then refused again: `failed` told once (before: the stale failed, then the new one)", async () => {
    const host = answeringHost({ onStatus: "ok", watchConversation: "hang" }, "not yours.");
    const sockets = scriptedSockets(host.endpoint);
    const client = new HarnessClient({ url: "ws://x.test/h", connect: () => sockets.connect() });
    const seen: string[] = [];
    client.onStatus((status) => seen.push(show(status)));
    await client.ready();
    await settle();
    host.answer.onStatus = "refuse";
    sockets.drop();
    await expect.poll(() => client.status.kind, { timeout: 5000 }).toBe("failed"); // the reconnect refused it
    host.answer.onStatus = "hang";
    sockets.drop();
    await expect.poll(() => host.asked.onStatus, { timeout: 5000 }).toBe(3); // asked again, unanswered
    await settle();
    host.answer.onStatus = "retry";
    sockets.drop(); // carried
    await expect.poll(() => host.asked.onStatus, { timeout: 5000 }).toBe(4); // AuthorizeFailed: it waits
    await settle();
    host.answer.onStatus = "refuse";
    await expect.poll(() => host.asked.onStatus, { timeout: 5000 }).toBe(5);
    await expect.poll(() => client.status.kind, { timeout: 3000 }).toBe("failed");
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(afterReconnecting(seen)).toEqual(["failed:NotAuthorized"]);
    client.terminate();
  });
});
