import type { ToolResultEntryPayload, ToolSlotView } from "pi-durable-web";
import { h } from "../dom.ts";
import { showApproval, showResultDecision } from "./approval-card.ts";
import { showAsk } from "./ask-person.ts";
import { compactJson, textOf } from "./text.ts";

/**
 * Tool cards: one per call id, placed on the assistant message that made the call. A card follows its live
 * slot (waiting, running with its streamed output) until its result entry arrives; from then on the result
 * entry is what it shows. A call that waits for a person carries its approval card (approval-card.ts); a call
 * of the page tool "ask the person" its question, in the tab that asks (ask-person.ts).
 */
const toolCards = new Map<string, HTMLElement>();

const TOOL_CODES: Record<string, string> = {
  interrupted: "interrupted — may have partially run",
  restart_limit: "restart limit reached — not run again",
  aborted: "aborted",
  tool_unavailable: "tool unavailable",
  invalid_arguments: "invalid arguments",
  blocked: "blocked",
  tool_error: "error",
  denied: "denied — not run",
};

/** A harness-written part of a result: `<harness>\n[error] message\n</harness>` (the model gets it as is). */
const HARNESS_NOTE = /^<harness>\n\[error\] ([\s\S]*)\n<\/harness>$/;

/** What the person reads for a result the harness wrote (the model still gets the harness's own text). */
const TOOL_NOTICES: Record<string, string> = {
  interrupted:
    "Cut off by a reload while it ran. It may have partially run, so it was not run again; any output above is what it reported before the cut.",
  restart_limit: "Cut off too many times in a row, so it was not run again.",
  aborted: "Stopped: the run was aborted.",
};

/** The card of call `id`, if one is shown. */
export function findToolCard(id: string): HTMLElement | undefined {
  return toolCards.get(id);
}

/** Forgets every card (a new worker renders the transcript again). */
export function forgetToolCards(): void {
  toolCards.clear();
}

/** The card of `call`, made on first use. */
export function toolCard(call: { id: string; name: string; arguments?: unknown }): HTMLElement {
  let card = toolCards.get(call.id);
  if (card) return card;
  card = h(
    "div",
    { class: "tool", "data-call-id": call.id, "data-status": "pending", "data-tool": call.name },
    h(
      "div",
      { class: "tool-head" },
      h("span", { class: "tool-icon", "aria-hidden": "true" }, "⚙"),
      h("code", { class: "tool-name" }, call.name),
      call.arguments === undefined
        ? null
        : h("code", { class: "tool-args", title: JSON.stringify(call.arguments) }, compactJson(call.arguments)),
      h("span", { class: "tool-status" }, "waiting"),
    ),
    h(
      "div",
      { class: "tool-section tool-output-section", hidden: true },
      h("span", { class: "tool-label" }, "output"),
      h("pre", { class: "tool-output" }),
    ),
    h(
      "div",
      { class: "tool-section tool-result-section", hidden: true },
      h("span", { class: "tool-label" }, "result"),
      h("pre", { class: "tool-result" }),
    ),
  );
  toolCards.set(call.id, card);
  return card;
}

function setToolStatus(card: HTMLElement, status: string, label: string): void {
  card.dataset.status = status;
  card.querySelector(".tool-status")!.textContent = label;
}

/** `output` is the streamed output when it is ahead of the committed one (not durable yet). */
export function applySlot(slot: ToolSlotView, streamed: string | undefined): void {
  const card = toolCards.get(slot.callId);
  if (!card || card.dataset.result === "") return; // the result entry is what counts once written
  setToolStatus(
    card,
    slot.status === "done" ? "pending" : slot.status,
    slot.status === "running"
      ? "running"
      : slot.status === "pending"
        ? "waiting"
        : slot.status === "awaiting-approval"
          ? "needs your approval"
          : slot.status === "awaiting-page"
            ? "waiting for a tab"
            : "finishing",
  );
  showApproval(card, slot);
  showAsk(card, slot);
  const output = streamed ?? slot.output;
  if (output) {
    const section = card.querySelector<HTMLElement>(".tool-output-section")!;
    section.hidden = false;
    const pre = section.querySelector("pre")!;
    pre.textContent = output;
    pre.dataset.durable = String(streamed === undefined);
  }
}

export function applyResult(card: HTMLElement, payload: ToolResultEntryPayload): void {
  const { message, code } = payload;
  card.dataset.result = "";
  if (code) card.dataset.code = code;
  card.classList.toggle("is-error", message.isError);
  setToolStatus(card, "done", code ? (TOOL_CODES[code] ?? code) : message.isError ? "error" : "done");
  showResultDecision(card, payload.approval);
  const section = card.querySelector<HTMLElement>(".tool-result-section")!;
  section.hidden = false;
  const parts = typeof message.content === "string" ? [{ type: "text" as const, text: message.content }] : message.content;
  const notes = parts.flatMap((part) => (part.type === "text" ? (HARNESS_NOTE.exec(part.text)?.slice(1, 2) ?? []) : []));
  const kept = parts.filter((part) => part.type !== "text" || !HARNESS_NOTE.test(part.text));
  const result = textOf(kept);
  const pre = section.querySelector("pre")!;
  pre.textContent = result;
  pre.hidden = kept.length === 0;
  section.querySelector(".tool-notice")?.remove();
  if (notes.length > 0) {
    const text = (code && TOOL_NOTICES[code]) || notes.join(" ");
    section.append(h("p", { class: "tool-notice", role: "note", title: notes.join("\n") }, text));
  }
  // The entry keeps what the tool streamed, so the card shows it after a reload too; not when the result
  // starts with it already (an interrupted call's result is its saved output and the notice).
  const output = card.querySelector<HTMLElement>(".tool-output-section")!;
  const streamed = payload.output && !result.startsWith(payload.output) ? payload.output : undefined;
  output.hidden = streamed === undefined;
  if (streamed !== undefined) output.querySelector("pre")!.textContent = streamed;
}
