import { afterEach, describe, expect, it, vi } from "vitest";
import { followObject } from "../src/browser/follow.ts";
import type { SocketLike } from "../src/browser/socket.ts";
import { createManualClock } from "../src/testing/clock.ts";

// Decision 0099 (a newcomer's run): a follow address the Worker refused (a bad token: 401), a wrong path or a Worker not
// running left the newcomer's page at `recovering` for good with nothing said anywhere — the harness waits for the
// object's lease, and a browser tells a WebSocket neither the HTTP status nor the reason. The worker now says so once
// on the console, without the address's query (it carries the user's token).

type Listener = () => void;

/** A socket that fails (`error` then `close`) or opens, as the test says, once its listeners are in. */
function sockets(outcomes: Array<"fail" | "open">) {
  const made: string[] = [];
  const all: Array<Record<string, Listener[]>> = [];
  const connect = (url: string): SocketLike => {
    made.push(url);
    const listeners: Record<string, Listener[]> = { open: [], message: [], close: [], error: [] };
    all.push(listeners);
    const outcome = outcomes.shift() ?? "fail";
    queueMicrotask(() => {
      for (const type of outcome === "fail" ? ["error", "close"] : ["open"]) for (const listener of listeners[type]!) listener();
    });
    return {
      send() {},
      close() {},
      addEventListener(type: string, listener: Listener) {
        listeners[type]!.push(listener);
      },
    } as unknown as SocketLike;
  };
  /** Socket `index` drops (its `close`), as a link that goes offline does. */
  const drop = (index: number) => {
    for (const listener of all[index]!.close!) listener();
  };
  return { made, connect, drop };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

afterEach(() => {
  vi.restoreAllMocks();
});

describe("a follow socket that never opens is said once (decision 0099)", () => {
  it("failing again and again (the worker keeps trying): one warning naming the address without its token", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const clock = createManualClock(0);
    const { made, connect } = sockets([]);
    const follow = followObject({ url: "ws://127.0.0.1:8787/conversations/42/follow?token=alice.secret", place: "p", connect }, clock);
    for (let attempt = 0; attempt < 5; attempt++) {
      await settle();
      clock.next();
    }
    await settle();
    expect(made.length).toBeGreaterThanOrEqual(5);
    expect(warn).toHaveBeenCalledTimes(1);
    const said = String(warn.mock.calls[0]![0]);
    expect(said).toContain("ws://127.0.0.1:8787/conversations/42/follow did not open");
    expect(said).not.toContain("?token=");
    expect(said).not.toContain("alice.secret");
    follow.close();
  });

  it("a socket that opened once and later drops (offline) says nothing: the address was right", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const clock = createManualClock(0);
    const { made, connect, drop } = sockets(["open"]); // then every later socket fails
    const follow = followObject({ url: "ws://object/follow", place: "p", connect }, clock);
    await settle();
    drop(0);
    for (let attempt = 0; attempt < 3; attempt++) {
      clock.next();
      await settle();
    }
    expect(made.length).toBeGreaterThanOrEqual(3);
    expect(warn).not.toHaveBeenCalled();
    follow.close();
  });
});
