/** The runtime-neutral host and its transport seam, for runtime adapters (the browser worker, a Durable Object). */
export { HostClient } from "./client.ts";
export { createHost, type HostMethod, type HostOptions, type ServedHost } from "./host.ts";
export type { Ownership } from "./ownership.ts";
export { hostEndpoint, remoteHost, type HostEndpoint, type ServedEndpoint } from "./endpoint.ts";
export { messageEndpoint, serveMessages, type ClientMessage, type HostMessage, type MessageConnection, type MessageEndpoint } from "./messages.ts";
export { deserializeError, serializeError, type SerializedError } from "./error-wire.ts";
export * from "./protocol.ts";
