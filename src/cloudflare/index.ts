export { DurableObjectDatabase, ImageUnavailable, type DurableObjectDatabaseOptions } from "./database.ts";
export { HarnessObject, defineHarnessObject, type HarnessObjectOptions, type HarnessObjectSetup } from "./object.ts";
export type { DurableObjectState, DurableObjectStorage, SqlStorage, SqlCursor, HibernatableWebSocket } from "./types.ts";
