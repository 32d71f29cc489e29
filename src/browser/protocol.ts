/** The worker protocol is the host's (src/host/protocol.ts); this path stays for the browser adapters' imports. */
export * from "../host/protocol.ts";
