import { type Context, throwIfCancelled, waitFor } from "../../base/context.ts";
import { cloneJson } from "../../base/json.ts";
import { NotFound } from "../../errors.ts";
import type { EntryRecord, SubmissionRecord } from "../../storage/records.ts";
import type { AssistantMessage } from "../model-types.ts";
import type { SubmissionOutcome, UnansweredReason } from "../types.ts";
import type { ConversationPort } from "./port.ts";

/** An admitted submission. Reacquire it after a reopen with `harness.submission(id, ctx)`. */
export class Submission {
  readonly id: number;
  readonly conversationId: number;
  readonly #host: ConversationPort;

  /** @internal Submissions come from `Conversation.submit` and `Harness.submission`. */
  constructor(host: ConversationPort, id: number, conversationId: number) {
    this.#host = host;
    this.id = id;
    this.conversationId = conversationId;
  }

  /** The stored record (status `queued`, `running`, `done` or `unanswered`). */
  async record(context: Context): Promise<SubmissionRecord> {
    throwIfCancelled(context);
    const session = this.#host.kernel.session;
    const record = session.openSubmissions.get(this.id) ?? (await waitFor(session.storage.getSubmission(this.id), context));
    if (!record) throw new NotFound(`Submission ${this.id} does not exist.`);
    return cloneJson(record);
  }

  /**
   * Resolves once the submission is settled: `done` (with the answer for an input) or `unanswered` with a
   * reason. Starts scheduling (unless read-only). Cancelling the context cancels only this wait.
   */
  async wait(context: Context): Promise<SubmissionOutcome> {
    throwIfCancelled(context);
    const kernel = this.#host.kernel;
    if (!kernel.readOnly) kernel.resume();
    const session = kernel.session;
    const settled = this.#host.settled(
      this.id,
      async () => session.openSubmissions.get(this.id) ?? (await session.storage.getSubmission(this.id)),
    );
    const record = await waitFor(settled, context);
    if (!record) throw new NotFound(`Submission ${this.id} does not exist.`);
    return outcomeOf(record, (id) => session.storage.getEntry(id));
  }
}

async function outcomeOf(record: SubmissionRecord, entry: (id: number) => Promise<EntryRecord | undefined>): Promise<SubmissionOutcome> {
  const result = (record.result ?? {}) as { answer?: number; entryId?: number; reason?: UnansweredReason; message?: string };
  if (record.status === "unanswered")
    return { status: "unanswered", reason: result.reason ?? "faulted", ...(result.message ? { message: result.message } : {}) };
  if (result.answer === undefined) return { status: "done", ...(result.entryId !== undefined ? { entryId: result.entryId } : {}) };
  const answer = await entry(result.answer);
  const message = (answer?.payload as { message?: AssistantMessage } | undefined)?.message;
  if (!message) return { status: "done" };
  const text = message.content
    .filter((block) => block.type === "text")
    .map((block) => block.text)
    .join("");
  return { status: "done", answer: { entryId: result.answer, text, message } };
}
