/**
 * The client API as RPC methods of a `HarnessObject`: a Worker calls its object through a stub without HTTP
 * (`env.AGENT.getByName(name).createTask("app.counter", { to: 5 })`), typed by wrangler's generated `Env`.
 * Each method is the host's call of the same name and goes through the same doors a page's call goes through
 * (the caller `RPC_CALLER`): what pages may not call is not served here either. Subscriptions stay on the WebSocket.
 *
 * Errors cross RPC as the runtime carries them: the caller gets an `Error` whose message starts with the
 * library's error name (`DatabaseCorrupt: …`, `NotFound: …`), so it can tell them apart without a wire format.
 */
import { errorMessage } from "../base/error-message.ts";
import { type MethodName, PROTOCOL, type RemoteHost } from "../host/protocol.ts";

/**
 * Who an RPC call is, to the object's doors: the Worker holding the binding (it checked its user before). The
 * powers the object turns on apply as to pages; an `authorize` hook may allow more to this caller than to a page.
 */
export const RPC_CALLER = { via: "rpc" } as const;

type Row<K extends MethodName> = (typeof PROTOCOL)[K];

/**
 * The host's calls a Worker reaches by RPC: every call its row serves to pages, except those a tab keeps local
 * (`lifeLock`) — read from PROTOCOL, so a new call is an RPC method too.
 */
export type RpcMethodName = {
  [K in MethodName]: Row<K> extends { kind: "call" } ? (Row<K> extends { servedToPages: false } | { local: true } ? never : K) : never;
}[MethodName];

export const RPC_METHODS = (Object.keys(PROTOCOL) as MethodName[]).filter(
  (name) => PROTOCOL[name].kind === "call" && PROTOCOL[name].servedToPages && !PROTOCOL[name].local,
) as RpcMethodName[];

/** The RPC methods of a `HarnessObject`, as a stub sees them (each answers asynchronously). */
export type HarnessRpc = { [K in RpcMethodName]: RemoteHost[K] };

/** An error for the other side of an RPC call: a plain `Error` with the library's name and message. */
export function rpcError(error: unknown): Error {
  if (!(error instanceof Error)) return new Error(errorMessage(error)); // never String(): { toString: null } throws
  const crossing = new Error(error.message);
  crossing.name = error.name;
  return crossing;
}
