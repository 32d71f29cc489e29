/**
 * Decision 0137, item 4 (decision 0123's review, L5): a wait that a refusal ends, and a new wait that begins before the
 * socket tells `open` for it (a task later: decision 0117's review seams2), are two stretches — the new one is told at its
 * own attempt and retry. Before, it merged into the ended one: `onState` went on saying the refused wait's attempt 3 and
 * its retry, and the page `reconnecting 3`, until the new wait was served.
 */
import { afterEach, expect, it, vi } from "vitest";
import { HarnessClient } from "../src/browser/client.ts";
import { type SocketState, socketEndpoint } from "../src/browser/socket.ts";
import { AuthorizeFailed, NotAuthorized } from "../src/errors.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { answeringHost, manualTimer, scriptedSockets, settle } from "./socket-support.ts";

afterEach(() => vi.useRealTimers());

const failedAsk = expect.objectContaining({ name: "AuthorizeFailed" });

it("0123 review L5: socket: a carried watch waits to attempt 3 and is refused; the status subscription asked as its caller hears the refusal waits — told unserved 1 with its own retry, then open once served (fails before: unserved 3 stayed)", async () => {
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
  let second: string | undefined;
  socket
    .subscribe("watchConversation", [1], () => {})
    .catch(() => {
      // Its caller hears the refusal and asks for something else at once: that one waits.
      socket
        .subscribe("onStatus", [], () => {})
        .then(
          () => (second = "answered"),
          (error: Error) => (second = error.name),
        );
    });
  await settle();
  host.answer.watchConversation = "retry";
  sockets.drop();
  await settle();
  await timer.fire(); // the reconnect: AuthorizeFailed, it waits (1)
  await timer.fire(); // (2)
  await timer.fire(); // (3)
  expect(states.at(-1)).toEqual({ state: "unserved", attempt: 3, retryInMs: 400, error: failedAsk });
  host.answer.watchConversation = "refuse";
  host.answer.onStatus = "retry";
  await timer.fire(); // the re-ask: refused; the status subscription asked then waits
  expect(states.at(-1)).toEqual({ state: "unserved", attempt: 1, retryInMs: 100, error: failedAsk });
  host.answer.onStatus = "ok";
  while (timer.pending > 0) await timer.fire(); // the refusal's deferred open (the new wait goes on), then its re-ask
  expect(second).toBe("answered");
  expect(states.at(-1)).toEqual({ state: "open" });
  expect(states.filter((state) => state.state === "open")).toHaveLength(3); // first, reconnect, served
  socket.close();
});

it("0123 review L5: HarnessClient: a carried view refused at attempt 2 while another view starts a wait — the page shows reconnecting 1 (the new wait), then ready (fails before: reconnecting 2 stayed until ready)", async () => {
  const mode = { one: "hang" as "hang" | "retry" | "refuse" };
  let endTwo: ((error: Error) => void) | undefined;
  const host: HostEndpoint = {
    call: async () => "done",
    subscribe: async (method, args, emit, lost) => {
      if (method === "onStatus") {
        emit({ kind: "ready", recovery: {} });
        return 1;
      }
      if (args[0] === 2) {
        endTwo = lost;
        return 2;
      }
      if (mode.one === "retry") throw new AuthorizeFailed(method);
      if (mode.one === "refuse") throw new NotAuthorized(method, "not yours.");
      return new Promise<number>(() => {});
    },
    unsubscribe: () => {},
  };
  // HarnessClient takes no timer options: its socket's backoff runs on vitest's fake timers (the review of 0137, L3;
  // before, about 2 s of real backoff).
  vi.useFakeTimers();
  /** Fires the pending timers in turn (the socket's reconnects and re-asks) until the page shows `status`. */
  const shows = async (status: string) => {
    for (let i = 0; i < 50 && seen.at(-1) !== status; i++) await vi.advanceTimersToNextTimerAsync();
    expect(seen.at(-1)).toBe(status);
  };
  const sockets = scriptedSockets(host);
  const client = new HarnessClient({ url: "ws://x.test/h", connect: () => sockets.connect() });
  const seen: string[] = [];
  client.onStatus((status: HarnessStatus) => seen.push(status.kind === "reconnecting" ? `reconnecting ${status.attempt}` : status.kind));
  await client.ready();
  client.watchConversationUpdates(1, () => {}).catch(() => endTwo?.(new AuthorizeFailed("watchConversation"))); // view 2's hook throws as view 1 is refused
  await client.watchConversationUpdates(2, () => {});
  mode.one = "retry";
  sockets.drop();
  await shows("reconnecting 2");
  mode.one = "refuse";
  await shows("ready");
  expect(seen.slice(seen.lastIndexOf("reconnecting 2"))).toEqual(["reconnecting 2", "reconnecting 1", "ready"]);
  client.terminate();
});
