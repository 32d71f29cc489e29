/**
 * S7: typed reports delivered to `HarnessOptions.onReport`. A report never throws into the harness: a
 * throwing handler is swallowed.
 */
export type Report =
  | {
      kind: "task_faulted";
      taskId: number;
      taskKind: string;
      conversationId: number;
      reason: "restart_limit" | "phase_failed" | "no_progress" | "abort_failed";
      message: string;
      detail?: unknown;
    }
  | {
      kind: "task_interrupted";
      taskId: number;
      taskKind: string;
      conversationId: number;
      reason: "interrupted" | "restart_limit";
      message: string;
    }
  | { kind: "error"; error: unknown; taskId?: number };

export type ReportHandler = (report: Report) => void;

export function deliver(handler: ReportHandler | undefined, report: Report): void {
  if (!handler) return;
  try {
    handler(report);
  } catch {
    // S7: reporting must never fail the harness.
  }
}
