/**
 * Every error the library throws on purpose is one of these classes (the registry: \`src/retryable.ts\` marks
 * each retryable or not, and they keep their class across every wire). \`name\` is stable (match on it, not on
 * the message); the message says what happened and what to do next. By concern, in src/errors/.
 */
export * from "./errors/base.ts";
export * from "./errors/lease.ts";
export * from "./errors/person.ts";
export * from "./errors/storage.ts";
export * from "./errors/tasks.ts";
export * from "./errors/wire.ts";
