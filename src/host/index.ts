/** The runtime-neutral host and its transport seam, for runtime adapters (the browser worker, a Durable Object). */
export { HostClient } from "./client.ts";
export { type HostEndpoint, hostEndpoint, remoteHost, type ServedEndpoint } from "./endpoint.ts";
export { deserializeError, type SerializedError, serializeError } from "./error-wire.ts";
export { createHost, type HostMethod, type HostOptions, type ServedHost } from "./host.ts";
export {
  type ClientMessage,
  type HostMessage,
  type MessageConnection,
  type MessageEndpoint,
  messageEndpoint,
  serveMessages,
} from "./messages.ts";
export type { Ownership } from "./ownership.ts";
export * from "./protocol.ts";
