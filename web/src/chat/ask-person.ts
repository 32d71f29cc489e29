import type { Json, ToolSlotView } from "pi-durable-web";
import type { HarnessClient } from "pi-durable-web/client";
import { ASK_PERSON } from "../../../worker/protocol.ts";
import { app } from "../app.ts";
import { rootConversationOf } from "../conversation.ts";
import { h } from "../dom.ts";

/**
 * "Ask the person", the demo's page tool (worker/protocol.ts: ASK_PERSON): every tab provides it. A waiting
 * call is claimed by one tab (a commit: the first wins); that tab shows the question with a button per
 * choice on the call's card, and the pick is the call's result, committed once. The other tabs' cards say
 * where it is being asked. A reload while it asks releases the claim: the call is unsafe, so it ends
 * interrupted and the model says so (S8).
 */
interface Ask {
  question: string;
  choices: string[];
  answer(choice: string): void;
}

/** The calls this tab claimed and is asking now, by call id. */
const asks = new Map<string, Ask>();
let stop: (() => void) | undefined;
/** The client the tool is provided through: once per worker (a second watch would end the first one's runs). */
let providedBy: HarnessClient | undefined;

function card(callId: string): HTMLElement | null {
  return document.querySelector<HTMLElement>(`#chat-log .tool[data-call-id="${CSS.escape(callId)}"]`);
}

/** Shows on `card` what the view says of its page call: the question (in the tab that asks), or where it is. */
export function showAsk(target: HTMLElement, slot: ToolSlotView): void {
  const ask = asks.get(slot.callId);
  const shown = target.querySelector<HTMLElement>(".ask");
  if (ask && !shown) target.querySelector(".tool-head")!.after(question(slot.callId, ask));
  if (!ask) shown?.remove();
  const elsewhere = !ask && slot.page?.status === "claimed";
  const note = target.querySelector(".ask-elsewhere");
  if (elsewhere && !note)
    target
      .querySelector(".tool-head")!
      .after(h("p", { class: "ask-elsewhere", role: "status" }, "Asked in another tab of this app: answer it there."));
  if (!elsewhere) note?.remove();
  if (ask || elsewhere) target.querySelector(".tool-status")!.textContent = ask ? "asking you" : "asked in another tab";
}

function question(callId: string, ask: Ask): HTMLElement {
  return h(
    "div",
    { class: "ask", role: "group", "aria-label": ask.question },
    h("p", { class: "ask-question" }, h("strong", null, ask.question)),
    h(
      "div",
      { class: "ask-choices" },
      ...ask.choices.map((choice) => {
        const button = h("button", { type: "button", class: "ask-choice", "data-choice": choice }, choice);
        button.addEventListener("click", () => {
          asks.delete(callId);
          card(callId)?.querySelector(".ask")?.remove();
          ask.answer(choice);
        });
        return button;
      }),
    ),
  );
}

function provide(client: HarnessClient): void {
  if (providedBy === client) return;
  providedBy = client;
  stop?.();
  stop = undefined;
  void (async () => {
    const conversationId = await rootConversationOf(client);
    if (!app.isCurrent(client)) return;
    const stopping = await client.providePageTools(
      conversationId,
      {
        [ASK_PERSON.tool]: (args: { [key: string]: Json }, call) =>
          new Promise<string>((resolve) => {
            const choices = Array.isArray(args.choices) ? args.choices.map(String) : [];
            const ask: Ask = { question: String(args.question ?? ""), choices, answer: resolve };
            asks.set(call.callId, ask);
            // The claim's view may have come already (nothing else commits while the person thinks): show it now.
            const target = card(call.callId);
            if (target && !target.querySelector(".ask")) {
              target.querySelector(".ask-elsewhere")?.remove();
              target.querySelector(".tool-head")!.after(question(call.callId, ask));
              target.querySelector(".tool-status")!.textContent = "asking you";
            }
            call.signal.addEventListener("abort", () => {
              // The call ended without this tab's answer (aborted, or the claim was released).
              asks.delete(call.callId);
              card(call.callId)?.querySelector(".ask")?.remove();
            });
          }),
      },
      { onError: (error) => app.showError(error, "ask the person") },
    );
    if (app.isCurrent(client)) stop = stopping;
    else stopping();
  })().catch((error) => {
    if (app.isCurrent(client)) app.showError(error, "providing the page tools");
  });
}

app.onReady(provide);
