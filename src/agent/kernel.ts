import type { Context } from "../base/context.ts";
import type { Report } from "../reports.ts";
import type { Session } from "../session/session.ts";
import type { TaskRecord } from "../storage/records.ts";

/**
 * The committed mirror and the commit line, as the agent may use them: it reads and commits, never seals,
 * recovers or changes the session's bookkeeping.
 */
export type AgentSession = Pick<
  Session,
  | "subscribe"
  | "read"
  | "commit"
  | "storage"
  | "live"
  | "conversations"
  | "documents"
  | "openSubmissions"
  | "rootConversationId"
  | "clock"
  | "fence"
>;

/**
 * Everything the agent layer needs of the kernel. `Harness.open` builds one and hands it to the agent's host
 * (`Conversations`); the agent never sees the harness itself.
 */
export interface AgentKernel {
  readonly session: AgentSession;
  /** True when the harness was opened read-only (every write rejects with `ReadOnlySession`). */
  readonly readOnly: boolean;
  /** True once `close()` was called. */
  readonly closed: boolean;
  /** Starts scheduling (`Harness.resume`). */
  resume(): void;
  abortTask(id: number, context: Context): Promise<"marked" | "terminal">;
  waitForTask(id: number, context: Context): Promise<TaskRecord>;
  /** Delivers a report to `HarnessOptions.onReport` (never throws). */
  report(report: Report): void;
}
