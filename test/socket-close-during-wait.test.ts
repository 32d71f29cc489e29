/**
 * Decision 0117, later (its review's finding 6): close() while a subscribe carried over a drop waits (answered
 * AuthorizeFailed, `unserved`): its caller hears ConnectionLost, even when the socket's close event comes later, as a
 * browser's does. Before, the loop found the link not dead yet and threw the cached, stale AuthorizeFailed.
 */
import { expect, it } from "vitest";
import { type SocketLike, socketEndpoint } from "../src/browser/socket.ts";
import { AuthorizeFailed } from "../src/errors.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { manualTimer, scriptedSockets, settle } from "./socket-support.ts";

it("0117 later: close() during a carried subscribe's wait, its close event not fired yet: the caller gets ConnectionLost (before: the stale AuthorizeFailed)", async () => {
  const mode = { answer: "hang" };
  const endpoint: HostEndpoint = {
    call: async () => "done",
    subscribe: async () => {
      if (mode.answer === "retry") throw new AuthorizeFailed("watchConversation");
      return new Promise<number>(() => {});
    },
    unsubscribe: () => {},
  };
  const sockets = scriptedSockets(endpoint);
  /** close() only asks: the close event fires when the test says (a browser's comes a task later). */
  const closing: Array<() => void> = [];
  const connect = (): SocketLike => {
    const ws = sockets.connect();
    return { send: ws.send, addEventListener: ws.addEventListener, close: () => void closing.push(() => ws.close()) } as SocketLike;
  };
  const timer = manualTimer();
  const socket = socketEndpoint(connect, {
    retryMs: 100,
    random: () => 1,
    setTimer: (fire, ms) => timer.setTimer(fire, ms),
    clearTimer: (handle) => timer.clearTimer(handle),
  });
  await settle();
  let settled: unknown;
  socket
    .subscribe("watchConversation", [1], () => {})
    .then(
      () => (settled = "answered"),
      (error: unknown) => (settled = error),
    );
  await settle();
  mode.answer = "retry";
  sockets.drop();
  await settle();
  await timer.fire(); // the reconnect: AuthorizeFailed, it waits
  expect(settled).toBeUndefined();
  socket.close();
  await settle();
  expect(settled).toMatchObject({ name: "ConnectionLost" });
  for (const fire of closing) fire(); // the close event arrives: nothing changes
  await settle();
  expect(settled).toMatchObject({ name: "ConnectionLost" });
  expect(timer.pending).toBe(0);
});
