/**
 * What `socketEndpoint` (./socket.ts, the page side of `connectHarness(url)`) takes and gives: the socket it drives,
 * its options, and the endpoint it returns. Moved out of socket.ts (review of 0151, L4).
 */
import type { HostEndpoint } from "../host/endpoint.ts";
import type { SocketState } from "./socket-state.ts";

/** The part of a WebSocket this endpoint uses (the browser's, or any look-alike). */
export interface SocketLike {
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "open" | "close" | "error", listener: () => void): void;
  addEventListener(type: "message", listener: (event: { data: unknown }) => void): void;
}

export interface ReconnectingEndpoint extends HostEndpoint {
  /** A call that waits for a connection `waitMs` at most (default `callWaitMs`), then rejects `NotReady`, never sent. */
  call(method: string, args: unknown[], waitMs?: number): Promise<unknown>;
  /** Stops reconnecting and closes the socket. */
  close(): void;
  /** How many times a connection was opened. */
  readonly connections: number;
}

export interface SocketEndpointOptions {
  /** The delay before the first reconnect after a connection the host answered on. Default 500 ms. */
  retryMs?: number;
  /** The longest delay between attempts. Default 10,000 ms. */
  maxRetryMs?: number;
  /** Told when a connection opens and when one is lost (with the coming attempt), and of unserved subscriptions. */
  onState?: (state: SocketState) => void;
  /** How long a call waits for a connection; then it ends `NotReady`, never sent. Default `CALL_WAIT_MS` (60 s, decision 0151). */
  callWaitMs?: number;
  /** For tests: the timer (and its clearing), the clock and the random source the backoffs use. */
  setTimer?: (fire: () => void, ms: number) => unknown;
  now?: () => number;
  clearTimer?: (timer: unknown) => void;
  random?: () => number;
}
