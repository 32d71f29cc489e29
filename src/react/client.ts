import type { ConversationView } from "../agent/view-store.ts";
import type { SubmissionDraft, SubmissionOutcome } from "../agent/types.ts";
import type { Inspection } from "../harness.ts";
import type { Report } from "../reports.ts";
import type { HarnessStatus } from "../browser/client.ts";

/** Stops a subscription. */
export type Unsubscribe = () => void;

/**
 * The part of `HarnessClient` (pi-durable-web/client) the hooks and the chat transport use. A
 * `HarnessClient` is one; a test may pass any object of this shape (an in-memory host, a fake).
 */
export interface ReactHarnessClient {
  readonly status: HarnessStatus;
  /** Calls `listener` with the status now and after every change; returns the unsubscribe function. */
  onStatus(listener: (status: HarnessStatus) => void): Unsubscribe;
  requestTakeover(): Promise<void>;
  onReport(listener: (report: Report) => void): Promise<Unsubscribe>;
  watchTasks(listener: (inspection: Inspection) => void): Promise<Unsubscribe>;
  openConversation(conversationId: number): Promise<ConversationView>;
  submit(conversationId: number, draft: SubmissionDraft): Promise<number>;
  waitForSubmission(submissionId: number): Promise<SubmissionOutcome>;
  /** Closes the database cleanly (the provider calls it when it unmounts a client it owns). */
  close(): Promise<void>;
  terminate(): void;
}

/** What the chat transport needs of a client. */
export type ChatClient = Pick<ReactHarnessClient, "openConversation" | "submit" | "waitForSubmission">;
