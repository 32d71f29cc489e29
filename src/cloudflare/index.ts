export type { FollowAction } from "../follow/object-end.ts";
export type { Authorize, CallAtDoor } from "../host/doors.ts";
export { ALL_POWERS, type Exposure, type MethodName } from "../host/protocol.ts";
export { DurableObjectDatabase, type DurableObjectDatabaseOptions } from "./database.ts";
export { FOLLOW_PATH, type FollowOptions } from "./follow.ts";
export { defineHarnessObject, HarnessObject } from "./object.ts";
export type { HarnessObjectOptions, HarnessObjectSetup } from "./options.ts";
export { type HarnessRpc, RPC_CALLER } from "./rpc.ts";
export type { DurableObjectState, DurableObjectStorage, HibernatableWebSocket, SqlCursor, SqlStorage } from "./types.ts";
