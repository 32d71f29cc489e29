import type { PageToolResult } from "../agent/tasks/page-calls.ts";
import type { ConversationViewState } from "../agent/view/view.ts";
import type { Json } from "../base/json.ts";
import { provisionOf, replyLost } from "../host/page-tools.ts";
import type { ChatClient, Unsubscribe } from "./client.ts";
import type { Reply } from "./reply.ts";
import type { ToolMode } from "./reply-chunks.ts";
import type { DurableUIMessage } from "./ui-messages.ts";

/**
 * Page tools under `useChat` (decision 0028): the page tools a chat runs through the AI SDK's own client-side
 * tool flow. A waiting call of one of them is claimed for this page (one commit: of two tabs, one wins) before
 * its part is sent as `input-available` without `providerExecuted`, so `onToolCall` fires here and nowhere
 * else; the stream then ends (`finish`, reason `tool-calls`), and the `addToolOutput` that follows comes back
 * through `sendAutomaticallyWhen` as the call's durable result. Every other call of a page tool — ended,
 * claimed by another page — is sent `providerExecuted`, so `onToolCall` never runs it again (a replay after
 * a reload included).
 */
export class PageChat {
  readonly #client: ChatClient;
  readonly #conversationId: number;
  readonly tools: ReadonlySet<string>;
  /**
   * The page this chat watches and claims as (the client's page id and a part of its own, as each `providePageTools`;
   * decision 0150's review): a second chat of the same conversation in this page claims as another page (its claim is
   * `PageCallTaken`, not a retry of this one's), and this chat's claims are released when its own watch ends.
   */
  readonly #provision: string;
  /** Calls this page claimed, by call id: their claim ids. */
  readonly #claims = new Map<string, string>();
  /** `${callId}:${attempt}` claims under way, and those another page won or that had ended. */
  readonly #claiming = new Set<string>();
  readonly #elsewhere = new Set<string>();
  /** Call ids with a claim under way. */
  readonly #inFlight = new Set<string>();
  /**
   * Claims whose reply was lost (they may have been stored at the host), by call id: sent again under the same claim id
   * (the host's retry) at a view state newer than the one they were sent at, or once at once; held meanwhile.
   */
  readonly #lost = new Map<string, { key: string; sentAt: ConversationViewState; resent: boolean }>();
  #watch: Promise<Unsubscribe> | undefined;

  constructor(client: ChatClient, conversationId: number, tools: readonly string[]) {
    this.#client = client;
    this.#conversationId = conversationId;
    this.tools = new Set(tools);
    this.#provision = provisionOf(client.pageId);
  }

  /** While the chat is open it provides its page tools: when the page goes, its claims are released. */
  watch(): void {
    if (this.tools.size === 0 || this.#watch) return;
    const watch = this.#client.watchPageCalls(
      this.#conversationId,
      { pageId: this.#provision, tools: [...this.tools] },
      () => {},
      // Refused again (decision 0114): the next request's open asks anew, as after a failed watch.
      () => this.#watch === watch && (this.#watch = undefined),
    );
    this.#watch = watch;
    watch.catch(() => this.#watch === watch && (this.#watch = undefined));
  }

  close(): void {
    void this.#watch?.then(
      (unsubscribe) => unsubscribe(),
      () => {},
    );
    this.#watch = undefined;
  }

  /** How each tool call of `reply` is sent, given the view `state`. */
  mode(state: ConversationViewState, reply: Reply): ToolMode {
    return (toolCallId, toolName) => {
      if (!this.tools.has(toolName)) return undefined;
      if (this.#claims.has(toolCallId)) return "client";
      if (reply.tools.has(toolCallId)) return "provider";
      // Its claim's commit may show in the view before the claim answers here: wait for the answer.
      if (this.#inFlight.has(toolCallId) || this.#lost.has(toolCallId)) return "hold";
      const slot = state.live.tools?.find((candidate) => candidate.callId === toolCallId);
      if (!slot) return state.live.run ? "hold" : "provider";
      const page = slot.page;
      if (slot.status === "done" || page?.status === "claimed") return "provider";
      if (page?.status === "waiting" && this.#elsewhere.has(`${toolCallId}:${page.attempts + 1}`)) return "provider";
      return "hold";
    };
  }

  /**
   * Claims the waiting calls of this chat's page tools in `state` for this page; `changed()` after each claim
   * settles (the stream sends what it decided).
   */
  claim(state: ConversationViewState, changed: () => void): void {
    // A lost claim whose call left the view (ended without a result here) is no longer held (decision 0152's review, L2).
    for (const [callId, { key }] of this.#lost) {
      if (!this.#claiming.has(key) && !state.live.tools?.some((slot) => slot.callId === callId)) this.#lost.delete(callId);
    }
    for (const slot of state.live.tools ?? []) {
      const page = slot.page;
      const lost = this.#lost.get(slot.callId);
      if (lost && !this.#claiming.has(lost.key)) {
        // Still waiting at the attempt it claimed, or claimed at it (by this chat, or another page: `PageCallTaken`).
        const ours = page?.status === "waiting" ? page.attempts + 1 : page?.status === "claimed" ? page.attempts : undefined;
        if (`${slot.callId}:${ours}` !== lost.key) this.#lost.delete(slot.callId);
        else {
          if (state !== lost.sentAt || !lost.resent) {
            lost.resent = true;
            this.#send(state, slot.callId, lost.key, changed);
          }
          continue;
        }
      }
      if (page?.status !== "waiting" || !this.tools.has(slot.name) || this.#claims.has(slot.callId)) continue;
      const key = `${slot.callId}:${page.attempts + 1}`;
      if (this.#claiming.has(key) || this.#elsewhere.has(key)) continue;
      this.#send(state, slot.callId, key, changed);
    }
  }

  /** Sends the claim `key` (`${callId}:${attempt}`) under this chat's claim id for it (the same when sent again). */
  #send(state: ConversationViewState, callId: string, key: string, changed: () => void): void {
    this.#claiming.add(key);
    this.#inFlight.add(callId);
    const claimId = `${this.#provision}:${key}`;
    this.#client
      .claimPageCall(this.#conversationId, callId, { claimId, pageId: this.#provision })
      .then(
        () => this.#claims.set(callId, claimId),
        (error) => {
          // The reply was lost: held, and claimed again under the same id (the host gives a stored claim back).
          if (replyLost(error)) this.#lost.set(callId, { key, sentAt: state, resent: this.#lost.get(callId)?.resent ?? false });
          else this.#elsewhere.add(key);
        },
      )
      .finally(() => {
        if (this.#claims.has(callId) || this.#elsewhere.has(key)) this.#lost.delete(callId);
        this.#claiming.delete(key);
        this.#inFlight.delete(callId); // answered: `#claims`, `#elsewhere` or `#lost` says how it is sent now
        changed();
      });
  }

  /**
   * True when the reply's last step waits only for calls this page runs: their parts are sent, nothing else in
   * the step is still running or held. The stream then ends so that `addToolOutput` can send the results.
   */
  waitsForThisPage(reply: Reply, mode: ToolMode): boolean {
    const tools = (reply.steps.at(-1)?.content ?? []).flatMap((item) => (item.type === "tool" ? [item] : []));
    let mine = false;
    for (const item of tools) {
      if (reply.tools.has(item.toolCallId)) continue;
      const how = mode(item.toolCallId, item.toolName);
      if (how === "client") mine = true;
      else if (how !== "provider") return false;
    }
    return mine;
  }

  /** The outputs `addToolOutput` gave the calls this page claimed, in the assistant message useChat sends. */
  outputs(message: DurableUIMessage): Array<{ callId: string; claimId: string; result: PageToolResult }> {
    const out: Array<{ callId: string; claimId: string; result: PageToolResult }> = [];
    for (const part of message.parts) {
      if (part.type !== "dynamic-tool" || !this.tools.has(part.toolName)) continue;
      const claimId = this.#claims.get(part.toolCallId);
      if (!claimId) continue;
      if (part.state === "output-available") out.push({ callId: part.toolCallId, claimId, result: resultOf(part.output) });
      else if (part.state === "output-error")
        out.push({ callId: part.toolCallId, claimId, result: { content: part.errorText, isError: true } });
    }
    return out;
  }

  /** Commits each output as its call's result (once; a second is `PageCallEnded`). */
  async answer(outputs: ReturnType<PageChat["outputs"]>): Promise<void> {
    for (const { callId, claimId, result } of outputs) {
      await this.#client.answerPageCall(this.#conversationId, callId, claimId, result);
      this.#claims.delete(callId);
    }
  }

  /** Marks the parts of page tools in `messages` as the stream sends them (after a reload, in another tab). */
  mark(messages: DurableUIMessage[]): DurableUIMessage[] {
    if (this.tools.size === 0) return messages;
    return messages.map((message) =>
      message.role !== "assistant"
        ? message
        : {
            ...message,
            parts: message.parts.map((part) =>
              part.type === "dynamic-tool" && this.tools.has(part.toolName)
                ? { ...part, providerExecuted: !(this.#claims.has(part.toolCallId) && part.state === "input-available") }
                : part,
            ),
          },
    );
  }
}

/** An `addToolOutput` output as a page tool's result: text as it is, anything else as JSON text with details. */
function resultOf(output: unknown): PageToolResult {
  if (typeof output === "string") return output;
  if (output === undefined) return "";
  return { content: JSON.stringify(output), details: output as Json };
}
