/** The kernel and the agent: tasks, commits, inputs, submissions, files. */
import { DurableError } from "./base.ts";

/** A task, conversation or submission id that does not exist. */
export class NotFound extends DurableError {
  override name = "NotFound";
}

/** A commit that breaks a rule of the task model (waiting on itself, a child in another conversation, …). */
export class InvalidCommit extends DurableError {
  override name = "InvalidCommit";
}

/** A runtime call from an invocation that has already ended (the phase returned, or the task was signalled). */
export class InvocationEnded extends DurableError {
  override name = "InvocationEnded";
  constructor(readonly taskId: number) {
    super(`Task ${taskId} invocation has ended; a phase may only use its runtime while it runs.`);
  }
}

/** A task definition or extension that cannot be installed (duplicate name, bad version, …). */
export class InvalidDefinition extends DurableError {
  override name = "InvalidDefinition";
}

/** `submit({ whenBusy: "reject" })` while the conversation is answering. Nothing was written; submit again later. */
export class ConversationBusy extends DurableError {
  override name = "ConversationBusy";
  constructor(readonly conversationId: number) {
    super(
      `Conversation ${conversationId} is busy answering; nothing was submitted. Submit with whenBusy "followUp" or "steer", or try again when it is idle.`,
    );
  }
}

/**
 * A value past a limit where it enters the harness (`settings.limits`: nesting depth, serialized size), or
 * not JSON at all, or a commit whose row would be larger than one row of the storage holds
 * (`Storage.maxRowBytes`: a Durable Object's 2 MB). Nothing was written. `limit` names what refused it:
 * `"maxDepth"`, `"maxBytes"`, `"shape"` or `"maxRowBytes"`.
 */
export class InvalidInput extends DurableError {
  override name = "InvalidInput";
  readonly limit: string;
  constructor(message: string, limit: "maxDepth" | "maxBytes" | "shape" | "maxRowBytes", options?: { cause?: unknown }) {
    super(message, options);
    this.limit = limit;
  }
}

/** A `submit()` draft that cannot be admitted (unknown type, empty content, a requestId reused for another type, …). */
export class InvalidSubmission extends DurableError {
  override name = "InvalidSubmission";
}

/** An execution environment has no file at that path. */
export class FileNotFound extends DurableError {
  override name = "FileNotFound";
  constructor(readonly path: string) {
    super(`No file ${JSON.stringify(path)} in this environment.`);
  }
}

/** A path that is not a string or leaves the execution environment's root. */
export class InvalidPath extends DurableError {
  override name = "InvalidPath";
}

/** `createTask(kind, input, { key })` with a key that already names a task of another kind or input. Nothing was written. */
export class TaskKeyConflict extends DurableError {
  override name = "TaskKeyConflict";
  readonly key: string;
  readonly taskId: number;
  constructor(key: string, taskId: number, existing: string) {
    super(
      `The key ${JSON.stringify(key)} already names task ${taskId} (${existing}); nothing was created. ` +
        `Pass the same kind and input to get that task again, or use a new key for a new task.`,
    );
    this.key = key;
    this.taskId = taskId;
  }
}

/** A task kind the page asked for is not installed in the worker's registry. */
export class UnknownTaskKind extends DurableError {
  override name = "UnknownTaskKind";
  constructor(
    readonly kind: string,
    installed: readonly string[],
  ) {
    super(`No task kind ${JSON.stringify(kind)} is installed in the worker. Installed: ${installed.join(", ") || "none"}.`);
  }
}

/** `api.output()` / `api.details()` after the tool call they belong to has ended (a late callback in a tool). */
export class ToolCallEnded extends DurableError {
  override name = "ToolCallEnded";
}
