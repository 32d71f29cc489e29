import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Edge, type ObjectKind, startEdge } from "./support.ts";

let edge: Edge;
beforeAll(async () => {
  edge = await startEdge();
}, 120_000);
afterAll(() => edge?.dispose());

/** The close event as this side saw it (miniflare's socket sets no `wasClean`: the code says whether a Close came). */
interface Closed {
  code: number;
  reason: string;
}

/** Opens a raw socket to object `name` at `path`, closes it from this side with 1000, and resolves with its close event. */
async function closeFromClient(object: ObjectKind, name: string, path: string, headers: Record<string, string> = {}): Promise<Closed> {
  const response = (await edge.call(object, name, path, { headers: { ...headers, Upgrade: "websocket" } })) as unknown as {
    webSocket: {
      accept(): void;
      close(code?: number, reason?: string): void;
      addEventListener(type: "close", listener: (event: Closed) => void): void;
    } | null;
  };
  const ws = response.webSocket;
  expect(ws, "the object accepted the socket").toBeTruthy();
  ws!.accept();
  const closed = new Promise<Closed>((resolve) =>
    ws!.addEventListener("close", (event) => resolve({ code: event.code, reason: event.reason })),
  );
  ws!.close(1000, "the page closed");
  return closed;
}

// A hibernatable socket's peer that closes waits for the object's reciprocal Close frame: the Hibernation API does not
// send one by itself on any compatibility date (the runtime's auto-reply covers `accept()` sockets from 2026-04-07 on).
// Before, `webSocketClose` never sent it: a page's or a tab's follow socket closed by its side stayed `CLOSING` until its
// own timeout and ended 1006 (not clean) — found by e2e/follow-close.e2e.ts (decision 0136).
describe("the object answers a peer's close (decision 0136)", () => {
  it("a page's socket closed by the page gets the object's Close frame: its code, not 1006", async () => {
    expect(await closeFromClient("counter", "close-page", "/")).toEqual({ code: 1000, reason: "the page closed" });
  });

  it("a tab's follow socket closed by the tab gets the object's Close frame: its code, not 1006", async () => {
    expect(await closeFromClient("follow", "close-follow", "/follow", { "x-caller": "tab" })).toEqual({
      code: 1000,
      reason: "the page closed",
    });
  });
});
