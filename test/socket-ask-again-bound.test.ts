/**
 * Review of decision 0138, M1: over a socket, `askAgain()` after a refusal waits for the host's status ask at most
 * `STATUS_ASK_MS` (the tabs' bound), on the page's timers (here vitest's fake ones): then it resolves with
 * `reconnecting` (`NotReady`), and the host's answer, should it come later, is the status (before: `askAgain()` and a
 * `ready()` made meanwhile stayed pending for good while the host's hook never answered).
 */
import { afterEach, expect, it, vi } from "vitest";
import { HarnessClient } from "../src/browser/client.ts";
import { STATUS_ASK_MS } from "../src/browser/tabs/own-status.ts";
import { NotAuthorized } from "../src/errors.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { scriptedSockets } from "./socket-support.ts";

afterEach(() => {
  vi.useRealTimers();
});

function outcome(p: Promise<unknown>) {
  const o = { v: "pending" };
  p.then(
    (x) => (o.v = `resolved ${(x as HarnessStatus | undefined)?.kind ?? "recovery"}`),
    (e: Error) => (o.v = `rejected ${e.name}`),
  );
  return o;
}

it("S12 (0138 review M1): over a socket, askAgain whose status ask the host never answers resolves within 15 s with reconnecting NotReady; the late answer is the status and settles ready() (before: both pending for good)", async () => {
  vi.useFakeTimers();
  const mode = { onStatus: "refuse" as "refuse" | "hang" };
  let late: ((status: HarnessStatus) => void) | undefined;
  const host: HostEndpoint = {
    call: async () => "done",
    subscribe: async (method, _args, emit) => {
      if (method !== "onStatus") return 1;
      if (mode.onStatus === "refuse") throw new NotAuthorized(method, "no");
      late = emit as (status: HarnessStatus) => void;
      return new Promise<number>(() => {}); // the hook never answers
    },
    unsubscribe: () => {},
  };
  const sockets = scriptedSockets(host);
  const client = new HarnessClient({ url: "ws://x.test/h", connect: () => sockets.connect() });
  const first = client.ready();
  first.catch(() => {});
  await vi.advanceTimersByTimeAsync(10);
  await expect(first).rejects.toBeInstanceOf(NotAuthorized);
  mode.onStatus = "hang";
  const asked = outcome(client.askAgain());
  const ready = outcome(client.ready());
  await vi.advanceTimersByTimeAsync(STATUS_ASK_MS - 100);
  expect([asked.v, ready.v, client.status.kind]).toEqual(["pending", "pending", "failed"]);
  await vi.advanceTimersByTimeAsync(200);
  expect(asked.v).toBe("resolved reconnecting");
  expect(client.status).toMatchObject({ kind: "reconnecting", error: { name: "NotReady" } });
  expect(ready.v).toBe("pending"); // reconnecting: ready() waits for the host's status, as on a tab
  late?.({ kind: "ready", database: "d", role: "leader", recovery: { interrupted: [] } } as unknown as HarnessStatus);
  await vi.advanceTimersByTimeAsync(10);
  expect(client.status.kind).toBe("ready");
  expect(ready.v).toBe("resolved recovery");
  client.terminate();
});
