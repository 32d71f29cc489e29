/**
 * Review of decision 0139, L3: a subscribe the object answers `NotReady` (its switch after a hand-back) waits and is
 * asked again — for as long as a call is sent again (`NOT_READY_RESEND_MS` since its first `NotReady`); then it ends
 * with that `NotReady`, asked nowhere again, and the socket is `open` again (before: asked again for good, `unserved`,
 * its caller never told). The page's own status subscription keeps waiting as decision 0123 has it. Vitest's fake timers.
 */
import { afterEach, expect, it, vi } from "vitest";
import { NOT_READY_RESEND_MS } from "../src/browser/not-ready-resend.ts";
import { type SocketState, socketEndpoint } from "../src/browser/socket.ts";
import { NotReady } from "../src/errors.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { scriptedSockets } from "./socket-support.ts";

afterEach(() => {
  vi.useRealTimers();
});

function hostInSwitch() {
  const asks: Record<string, number> = {};
  let serving = false;
  const host: HostEndpoint = {
    call: async () => null,
    subscribe: async (method) => {
      asks[method] = (asks[method] ?? 0) + 1;
      if (!serving) throw new NotReady("the object is between its harnesses after a hand-back");
      return 1;
    },
    unsubscribe: () => {},
  };
  return { host, asks, serve: () => void (serving = true) };
}

it("S12 (0139 review L3): a watch answered NotReady for good ends with the NotReady once NOT_READY_RESEND_MS passed, and is asked no more (before: asked again for good)", async () => {
  vi.useFakeTimers();
  const { host, asks } = hostInSwitch();
  const states: SocketState[] = [];
  const page = socketEndpoint(scriptedSockets(host).connect, { onState: (state) => states.push(state) });
  const outcome = { v: "pending" as unknown };
  page
    .subscribe("onReport", [], () => {})
    .then(
      () => (outcome.v = "served"),
      (error: unknown) => (outcome.v = error),
    );
  await vi.advanceTimersByTimeAsync(NOT_READY_RESEND_MS - 1_000);
  expect(outcome.v).toBe("pending"); // waiting within the window, asked again
  expect(asks.onReport).toBeGreaterThan(1);
  expect(states.at(-1)?.state).toBe("unserved");
  await vi.advanceTimersByTimeAsync(20_000);
  expect(outcome.v).toBeInstanceOf(NotReady);
  const asked = asks.onReport;
  await vi.advanceTimersByTimeAsync(10 * 60_000);
  expect(asks.onReport).toBe(asked);
  expect(states.at(-1)?.state).toBe("open");
  page.close();
});

it("S12 (0139 review L3): a watch the next instance serves within the window is served; the status subscription keeps waiting past it (decision 0123)", async () => {
  vi.useFakeTimers();
  const { host, asks, serve } = hostInSwitch();
  const page = socketEndpoint(scriptedSockets(host).connect);
  const watch = { v: "pending" as unknown };
  const status = { v: "pending" as unknown };
  page
    .subscribe("onReport", [], () => {})
    .then(
      () => (watch.v = "served"),
      (error: unknown) => (watch.v = error),
    );
  await vi.advanceTimersByTimeAsync(NOT_READY_RESEND_MS / 2);
  serve();
  await vi.advanceTimersByTimeAsync(15_000);
  expect(watch.v).toBe("served");
  const { host: never, asks: statusAsks } = hostInSwitch();
  const other = socketEndpoint(scriptedSockets(never).connect);
  other
    .subscribe("onStatus", [], () => {})
    .then(
      () => (status.v = "served"),
      (error: unknown) => (status.v = error),
    );
  await vi.advanceTimersByTimeAsync(3 * NOT_READY_RESEND_MS);
  expect(status.v).toBe("pending");
  const asked = statusAsks.onStatus!;
  await vi.advanceTimersByTimeAsync(30_000);
  expect(statusAsks.onStatus!).toBeGreaterThan(asked);
  expect(asks.onReport).toBeGreaterThan(1);
  page.close();
  other.close();
});
