import type { ChatTransport, UIMessageChunk } from "ai";
import type { SubmissionOutcome, ToolSlotView, UserContent } from "../agent/types.ts";
import type { ConversationViewState } from "../agent/view/view.ts";
import type { ConversationView } from "../agent/view/view-store.ts";
import { errorMessage } from "../base/error-message.ts";
import { UnsupportedChatRequest } from "../errors.ts";
import { cancelPending } from "../host/pending-subscription.ts";
import { describeValue } from "../shape.ts";
import type { ChatClient } from "./client.ts";
import { PageChat } from "./page-chat.ts";
import { liveTurn, type Reply, type RunFailureData, replyOf, submissionOf, type Turn, taskOfApproval, turnsOf } from "./reply.ts";
import { ReplyChunks, type ToolMode } from "./reply-chunks.ts";
import { type DurableUIMessage, toUIMessages } from "./ui-messages.ts";

export interface DurableChatTransportOptions {
  /** The page's harness client (`connectHarness(worker)`, or `useHarnessClient()` under a provider). */
  client: ChatClient;
  conversationId: number;
  /**
   * Page tools (declared in the worker with `definePageTool`) this chat runs through the AI SDK's client-side
   * tool flow: `onToolCall` gets each call this tab claimed, `addToolOutput` with
   * `sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls` commits its result (decision 0028).
   */
  pageTools?: readonly string[];
}

/**
 * A `ChatTransport` for the AI SDK's `useChat` whose answers come from a durable conversation: the user's
 * message is submitted as a durable input (its message id is the `requestId`, so sending it again is not a
 * second input), and the answer streams from the conversation's committed and live state. After a reload,
 * `useChat({ resume: true })` re-attaches to a run still going, and `loadMessages()` gives the transcript.
 *
 *   const transport = new DurableChatTransport({ client, conversationId });
 *   const { messages, sendMessage } = useChat({ transport, messages: await transport.loadMessages(), resume: true });
 *
 * A tool that asks a person: the stream ends at the approval request (the part `approval-requested`), and
 * `useChat`'s documented wiring decides it durably —
 * `useChat({ …, sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses })`, then
 * `addToolApprovalResponse({ id: part.approval.id, approved, reason })` — after a reload too.
 *
 * Ending a stream (`stop()`, an unmount) detaches the page; the run goes on. To stop the run itself call
 * `client.abortConversation(conversationId)`.
 */
export class DurableChatTransport implements ChatTransport<DurableUIMessage> {
  /** A reconnect streams the whole answer from its start; useChat replaces the message it had by id. */
  readonly resumeStreamIsReplay = true;
  readonly conversationId: number;
  readonly #client: ChatClient;
  #view: Promise<ConversationView> | undefined;
  /** The view once `#view` opened (closing it then needs no cancel: a client's late cancel may unsubscribe twice). */
  #opened: ConversationView | undefined;
  #closed = false;
  readonly #pages: PageChat;

  constructor(options: DurableChatTransportOptions) {
    this.#client = options.client;
    this.conversationId = options.conversationId;
    this.#pages = new PageChat(options.client, options.conversationId, options.pageTools ?? []);
  }

  async sendMessages(options: Parameters<ChatTransport<DurableUIMessage>["sendMessages"]>[0]): Promise<ReadableStream<UIMessageChunk>> {
    if (options.trigger === "regenerate-message") {
      throw new UnsupportedChatRequest(
        "A durable conversation keeps every answer it committed, so it cannot regenerate one: send the message again instead.",
      );
    }
    const last = options.messages.at(-1);
    const responses = last?.role === "assistant" ? approvalResponses(last) : [];
    const outputs = last?.role === "assistant" ? this.#pages.outputs(last) : [];
    if (responses.length > 0 || outputs.length > 0) return this.#decide(responses, outputs, options.abortSignal);
    if (last?.role !== "user")
      throw new UnsupportedChatRequest("The durable transport sends the user's newest message: the last message was not from the user.");
    const content = userContent(last);
    const view = await this.#open();
    const submissionId = await this.#client.submit(this.conversationId, { type: "input", content, requestId: last.id });
    return this.#replyStream(view, submissionId, options.abortSignal);
  }

  async reconnectToStream(
    options: Parameters<ChatTransport<DurableUIMessage>["reconnectToStream"]>[0],
  ): Promise<ReadableStream<UIMessageChunk> | null> {
    const view = await this.#open();
    const run = view.state.live.run;
    const turns = turnsOf(view.state.entries);
    if (!run) return this.#failedStream(turns.at(-1), view.state);
    const turn = liveTurn(view.state, turns);
    const submissionId = (turn && submissionOf(turn)) ?? run.inputs.at(-1);
    return submissionId === undefined ? null : this.#replyStream(view, submissionId, options.abortSignal);
  }

  /**
   * `addToolApprovalResponse({ id, approved, reason })` as the durable decision of the call it names (its tool
   * task), then the answer as it goes on. A decision another tab made first rejects with `AlreadyDecided`.
   */
  async #decide(
    responses: ApprovalResponse[],
    outputs: ReturnType<PageChat["outputs"]>,
    signal: AbortSignal | undefined,
  ): Promise<ReadableStream<UIMessageChunk>> {
    const view = await this.#open();
    // What the page shows of the answer now (useChat goes on from its message): the stream sends what follows.
    const turn = liveTurn(view.state, turnsOf(view.state.entries));
    const submissionId = (turn && submissionOf(turn)) ?? view.state.live.run?.inputs.at(-1);
    const shown = turn && replyOf(view.state, turn, true);
    for (const { taskId, approved, reason } of responses)
      await this.#client.decide(this.conversationId, taskId, { approved, ...(reason !== undefined ? { reason } : {}) });
    // `addToolOutput` for a page tool call this tab claimed: its durable result, once.
    await this.#pages.answer(outputs);
    if (submissionId === undefined) throw new UnsupportedChatRequest("The decided call's answer is not in this conversation's view.");
    const decided = new Set(responses.map((response) => response.taskId));
    return this.#replyStream(view, submissionId, signal, { ...(shown ? { shown } : {}), decided });
  }

  /** The committed transcript (and a run still going, as far as it got), for `useChat({ messages })`. */
  async loadMessages(): Promise<DurableUIMessage[]> {
    return this.#pages.mark(toUIMessages((await this.#open()).state));
  }

  /**
   * Calls `listener` with the transcript as `useChat` messages now and after every change of the conversation,
   * whoever made it (another tab, a task, the worker): hand them to `useChat`'s `setMessages` while this tab's
   * chat is not streaming, and every tab's `useChat` shows what any tab sent or was answered, as it streams.
   * Resolves with the unsubscribe function.
   *
   *   useEffect(() => {
   *     const stop = transport.onTranscriptChange((messages) => idle.current && setMessages(messages));
   *     return () => void stop.then((unsubscribe) => unsubscribe());
   *   }, [transport, setMessages]);
   */
  async onTranscriptChange(listener: (messages: DurableUIMessage[]) => void): Promise<() => void> {
    const view = await this.#open();
    return view.subscribe((state) => listener(this.#pages.mark(toUIMessages(state))));
  }

  /** Ends the transport's subscription to the conversation (useChat calls it when its chat is disposed). */
  close(): void {
    this.#closed = true;
    this.#pages.close();
    if (this.#opened) this.#opened.close();
    else {
      cancelPending(this.#view); // a view still being opened (a copy waiting for the conversation): given up (decision 0111)
      void this.#view?.then(
        (view) => view.close(),
        () => {},
      );
    }
    this.#view = undefined;
    this.#opened = undefined;
  }

  #open(): Promise<ConversationView> {
    if (this.#closed) return Promise.reject(new UnsupportedChatRequest("This DurableChatTransport was closed: make a new one."));
    if (!this.#view) {
      const opening = this.#client.openConversation(this.conversationId);
      this.#view = opening;
      this.#pages.watch();
      // A failed open is not kept: the next request tries again (the worker may have been starting).
      opening.then(
        (view) => {
          if (this.#view !== opening) return;
          this.#opened = view;
          // Lost (the host refused it when the transport asked it again, decision 0114): the next request opens anew.
          view.onLost(() => {
            if (this.#view !== opening) return;
            this.#view = undefined;
            this.#opened = undefined;
          });
        },
        () => this.#view === opening && (this.#view = undefined),
      );
    }
    return this.#view;
  }

  /**
   * The last answer when its run ended without one (a `pi.run-failure` entry), replayed with its `error`
   * chunk: `useChat({ resume: true })` then shows the failure as `error` after a reload too. Null otherwise.
   */
  #failedStream(turn: Turn | undefined, state: ConversationViewState): ReadableStream<UIMessageChunk> | null {
    const reply = turn && replyOf(state, turn, false);
    if (!reply?.failure) return null;
    const chunks = new ReplyChunks(reply.id).finish(reply, reply.failure);
    return new ReadableStream<UIMessageChunk>({
      start(controller) {
        for (const chunk of chunks) controller.enqueue(chunk);
        controller.close();
      },
    });
  }

  /**
   * The answer to `submissionId` as chunks, until the submission settles — or until the run waits for a person
   * (every call of its tool round asks for a decision, none of them one this request just `decided`): then the
   * stream finishes, as the AI SDK's own does at an approval request, and `addToolApprovalResponse` with
   * `sendAutomaticallyWhen` sends the decision as the next request. `shown`: the reply as the page has it
   * already (that request goes on from its message), so only what follows is sent.
   */
  #replyStream(
    view: ConversationView,
    submissionId: number,
    signal: AbortSignal | undefined,
    from: { shown?: Reply; decided?: ReadonlySet<number> } = {},
  ): ReadableStream<UIMessageChunk> {
    let toolMode: ToolMode | undefined;
    const chunks = new ReplyChunks(`reply-${submissionId}`, (toolCallId, toolName) => toolMode?.(toolCallId, toolName));
    if (from.shown) chunks.update(from.shown);
    let outcome: SubmissionOutcome | undefined;
    let ended = false;
    let unsubscribe: (() => void) | undefined;
    let controller!: ReadableStreamDefaultController<UIMessageChunk>;
    let unlost: (() => void) | undefined;
    const end = () => {
      if (ended) return;
      ended = true;
      unsubscribe?.();
      unlost?.();
      signal?.removeEventListener("abort", end);
      try {
        controller.close();
      } catch {
        // Already cancelled by its reader.
      }
    };
    const onState = (state: ConversationViewState) => {
      if (ended) return;
      const turns = turnsOf(state.entries);
      const turn = turns.findLast((candidate) => submissionOf(candidate) === submissionId);
      const settled = outcome !== undefined && caughtUp(state, submissionId, outcome);
      if (turn) {
        const current = turn === liveTurn(state, turns);
        const reply = replyOf(state, turn, current);
        toolMode = this.#pages.mode(state, reply);
        if (!settled) this.#pages.claim(state, () => onState(view.state));
        // Only a person's decision or this page's tool calls are left: the stream ends so that useChat sends them.
        const asking = !settled && current && (waitsForPerson(state, from.decided) || this.#pages.waitsForThisPage(reply, toolMode));
        const sent = settled
          ? chunks.finish(reply, failureOf(outcome!, reply.failure))
          : asking
            ? chunks.finish(reply, undefined, "tool-calls")
            : chunks.update(reply);
        for (const chunk of sent) controller.enqueue(chunk);
        if (asking) return end();
      } else if (settled) {
        for (const chunk of chunks.finish({ id: chunks.messageId, steps: [], tools: new Map() }, failureOf(outcome!, undefined)))
          controller.enqueue(chunk);
      }
      if (settled) end();
    };
    return new ReadableStream<UIMessageChunk>({
      start: (streamController) => {
        controller = streamController;
        if (signal?.aborted) return end();
        signal?.addEventListener("abort", end, { once: true });
        unsubscribe = view.subscribe(onState);
        // The view lost (decision 0114): useChat shows the host's error, as it shows a failed wait.
        unlost = view.onLost((error) => {
          if (ended) return;
          controller.enqueue({ type: "error", errorText: errorMessage(error) });
          end();
        });
        this.#client.waitForSubmission(submissionId).then(
          (settledWith) => {
            outcome = settledWith;
            onState(view.state);
          },
          (error: unknown) => {
            if (ended) return;
            controller.enqueue({ type: "error", errorText: errorMessage(error) });
            end();
          },
        );
      },
      cancel: end,
    });
  }
}

/**
 * The run waits for a person: its tool round has a call that asks for a decision (not one in `decided`), and
 * every other call is done or waits behind it (a sequential round's later call has no task yet).
 */
function waitsForPerson(state: ConversationViewState, decided: ReadonlySet<number> | undefined): boolean {
  const slots = state.live.tools ?? [];
  const asking = (slot: ToolSlotView) => slot.status === "awaiting-approval" && slot.taskId !== undefined && !decided?.has(slot.taskId);
  return (
    slots.some(asking) &&
    slots.every((slot) => asking(slot) || slot.status === "done" || (slot.status === "pending" && slot.taskId === undefined))
  );
}

/** The view shows the submission's end: no live run answers it, and a committed answer is in. */
function caughtUp(state: ConversationViewState, submissionId: number, outcome: SubmissionOutcome): boolean {
  if (state.live.run?.inputs.includes(submissionId)) return false;
  const answer = outcome.status === "done" ? outcome.answer?.entryId : undefined;
  return answer === undefined || (state.entries.at(-1)?.id ?? 0) >= answer;
}

function failureOf(outcome: SubmissionOutcome, failure: RunFailureData | undefined): RunFailureData | undefined {
  if (outcome.status === "done") return undefined;
  return failure ?? { reason: outcome.reason, message: outcome.message ?? `The input was not answered (${outcome.reason}).` };
}

interface ApprovalResponse {
  taskId: number;
  approved: boolean;
  reason?: string;
}

/** The tool parts of an assistant message that a person answered (`approval-responded`) and that ask us. */
function approvalResponses(message: DurableUIMessage): ApprovalResponse[] {
  const out: ApprovalResponse[] = [];
  for (const part of message.parts) {
    if (!("state" in part) || part.state !== "approval-responded" || !("approval" in part) || !part.approval) continue;
    // A message may come from anywhere (restored from storage, a server): a non-text id names no call.
    const taskId = typeof part.approval.id === "string" ? taskOfApproval(part.approval.id) : undefined;
    if (taskId === undefined) continue;
    out.push({ taskId, approved: part.approval.approved, ...(part.approval.reason !== undefined ? { reason: part.approval.reason } : {}) });
  }
  return out;
}

/** A user message's text and images as the harness's input content. */
function userContent(message: DurableUIMessage): UserContent {
  const content: Exclude<UserContent, string> = [];
  for (const part of message.parts) {
    if (part.type === "text") {
      if (typeof part.text !== "string")
        throw new UnsupportedChatRequest(`A text part's text must be a string; got ${describeValue(part.text)}.`);
      content.push({ type: "text", text: part.text });
    } else if (part.type === "file") {
      const image = typeof part.url === "string" ? /^data:(image\/[\w.+-]+);base64,(.*)$/s.exec(part.url) : null;
      if (!image) {
        // Described, never turned into text: a part restored from JSON may hold anything ({ toString: null }).
        const name =
          typeof part.filename === "string"
            ? part.filename
            : typeof part.url === "string"
              ? part.url.slice(0, 40)
              : describeValue(part.url);
        throw new UnsupportedChatRequest(
          `A durable input carries text and images as data: URLs; the file ${name} (${typeof part.mediaType === "string" ? part.mediaType : describeValue(part.mediaType)}) is neither.`,
        );
      }
      content.push({ type: "image", mimeType: image[1]!, data: image[2]! });
    }
  }
  if (content.length === 0) throw new UnsupportedChatRequest("The user's message has no text or image to send.");
  return content.every((item) => item.type === "text") ? content.map((item) => (item as { text: string }).text).join("\n") : content;
}
