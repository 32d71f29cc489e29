/**
 * A page's reconnecting socket (src/browser/socket.ts) against a host served through `serveMessages`, one connection
 * per socket the page opens, with frames delivered a microtask later as a socket would. The watch tests of decisions
 * 0111 and 0114 drive it: `drop()` ends the page's current connection (the host sees it close), `failAttempts(n)` makes
 * the next `n` attempts fail before they open (error, then close).
 */
import type { SocketLike } from "../src/browser/socket.ts";
import { AuthorizeFailed, NotAuthorized } from "../src/errors.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { type HostMessage, type ServeMessagesOptions, serveMessages } from "../src/host/messages.ts";

export function scriptedSockets(endpoint: HostEndpoint, options: ServeMessagesOptions = {}) {
  const sockets: Array<{ drop(): void; open: boolean }> = [];
  let failNext = 0;
  const connect = (): SocketLike => {
    const listeners: Record<string, Array<(event?: any) => void>> = { open: [], message: [], close: [], error: [] };
    const fire = (type: string, event?: unknown) => {
      for (const listener of listeners[type]!) listener(event);
    };
    const state = { open: true, drop: () => {} };
    const connection = serveMessages(
      endpoint,
      (message: HostMessage) => {
        const data = JSON.stringify(message);
        queueMicrotask(() => state.open && fire("message", { data }));
      },
      options,
    );
    state.drop = () => {
      if (!state.open) return;
      state.open = false;
      connection.close();
      fire("close");
    };
    sockets.push(state);
    if (failNext > 0) {
      failNext--;
      state.open = false;
      connection.close();
      queueMicrotask(() => {
        fire("error");
        fire("close");
      });
    } else queueMicrotask(() => state.open && fire("open"));
    return {
      send: (data: string) => void (state.open && connection.receive(JSON.parse(data))),
      close: () => state.drop(),
      addEventListener: (type: string, listener: (event?: any) => void) => void listeners[type]!.push(listener),
    } as SocketLike;
  };
  return {
    connect,
    /** Drops the page's current connection (the host sees it close). */
    drop: () => sockets.at(-1)?.drop(),
    /** The next `n` attempts fail before they open. */
    failAttempts: (n: number) => void (failNext = n),
  };
}

/** Lets every queued frame, open and retry (timers of 0 ms) run. */
export const settle = async () => {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setTimeout(resolve, 0));
};

/** A manual clock for the socket's backoffs: each reconnect and re-ask waits here until fired (or cleared); what was
 *  cleared is kept (`cleared`). */
export function manualTimer() {
  const waiting: Array<{ fire: () => void; ms: number }> = [];
  return {
    delays: [] as number[],
    cleared: [] as unknown[],
    setTimer(fire: () => void, ms: number) {
      this.delays.push(ms);
      const timer = { fire, ms };
      waiting.push(timer);
      return timer;
    },
    clearTimer(timer: unknown) {
      this.cleared.push(timer);
      const at = waiting.indexOf(timer as never);
      if (at >= 0) waiting.splice(at, 1);
    },
    async fire() {
      waiting.shift()?.fire();
      await settle();
    },
    get pending() {
      return waiting.length;
    },
  };
}

/** How `answeringHost` answers a method's subscribe. */
export type Answer = "ok" | "hang" | "retry" | "refuse";

/**
 * A host whose answer to each method's subscribe the test sets (`answer`, starting from `initial`) and counts
 * (`asked`): `ok`, `hang` (never answers), `retry` (AuthorizeFailed), `refuse` (NotAuthorized with `refusal`);
 * `onStatus` tells `ready` before it answers. Calls answer "done". The 0117 later tests drive their sockets with it.
 */
export function answeringHost(initial: Record<string, Answer>, refusal: string) {
  const answer: Record<string, Answer> = { ...initial };
  const asked: Record<string, number> = Object.fromEntries(Object.keys(initial).map((method) => [method, 0]));
  let next = 0;
  const endpoint: HostEndpoint = {
    call: async () => "done",
    subscribe: async (method, _args, emit) => {
      asked[method] = (asked[method] ?? 0) + 1;
      const now = answer[method] ?? "ok";
      if (now === "retry") throw new AuthorizeFailed(method);
      if (now === "refuse") throw new NotAuthorized(method, refusal);
      if (method === "onStatus") emit({ kind: "ready", recovery: {} });
      if (now === "hang") return new Promise<number>(() => {});
      return ++next;
    },
    unsubscribe: () => {},
  };
  return { answer, asked, endpoint };
}
