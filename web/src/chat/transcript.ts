import type {
  AssistantEntryPayload,
  CompactionEntryPayload,
  ConversationViewState,
  EntryRecord,
  RunFailureEntryPayload,
  ToolResultEntryPayload,
  UserEntryPayload,
} from "pi-durable-web";
import { ASK_BEFORE_WRITING, askBeforeWriting } from "../../../worker/protocol.ts";
import { app } from "../app.ts";
import { conversation } from "../conversation.ts";
import { byId, h } from "../dom.ts";
import { assistantBody, failureNotice } from "./message.ts";
import { compactJson, textOf } from "./text.ts";
import { applyResult, findToolCard, forgetToolCards, toolCard } from "./tool-cards.ts";

/**
 * The committed transcript. Entries are append-only, so each is rendered once: new ones go at the end, older
 * pages loaded on demand go in front, a summary stands where the messages it replaced end.
 */
const scroller = byId("chat-scroll");
const log = byId<HTMLOListElement>("chat-log");
const renderedEntries = new Set<number>();

/** Starts over (a new worker: its view replaces everything). */
export function clearTranscript(): void {
  renderedEntries.clear();
  forgetToolCards();
  log.replaceChildren();
}

function renderEntry(entry: EntryRecord): HTMLElement | undefined {
  const at = { "data-entry-id": String(entry.id), "data-kind": entry.kind };
  switch (entry.kind) {
    case "pi.user": {
      const { message } = entry.payload as unknown as UserEntryPayload;
      return h("li", { class: "msg user", ...at }, h("div", { class: "bubble" }, textOf(message.content)));
    }
    case "pi.assistant": {
      const { message } = entry.payload as unknown as AssistantEntryPayload;
      const item = h(
        "li",
        { class: "msg assistant", ...at, "data-stop-reason": message.stopReason },
        h("span", { class: "avatar", "aria-hidden": "true" }, "π"),
        assistantBody(message, false),
      );
      const body = item.querySelector(".msg-body")!;
      if (message.stopReason === "aborted")
        body.append(
          h(
            "p",
            { class: "msg-flag is-aborted" },
            "Cut off — this part was saved before the answer stopped; it is kept here but not sent to the model again.",
          ),
        );
      if (message.stopReason === "error")
        body.append(h("p", { class: "msg-flag is-error" }, `error: ${message.errorMessage ?? "the model request failed"}`));
      return item;
    }
    case "pi.tool-result": {
      const payload = entry.payload as unknown as ToolResultEntryPayload;
      const existing = findToolCard(payload.message.toolCallId);
      const card = existing ?? toolCard({ id: payload.message.toolCallId, name: payload.message.toolName });
      applyResult(card, payload);
      card.dataset.entryId = String(entry.id);
      return existing ? undefined : h("li", { class: "msg tool-only", ...at }, card);
    }
    case "pi.compaction": {
      const { message } = entry.payload as unknown as CompactionEntryPayload;
      return h(
        "li",
        { class: "msg divider", ...at },
        h("details", null, h("summary", null, "Earlier messages were summarized"), h("p", null, textOf(message.content))),
      );
    }
    case "pi.system": {
      // The system prompt as the model sees it from here on: instructions by section, and the tools offered.
      const message =
        (entry.payload as { message?: { content?: unknown; sections?: Record<string, unknown>; toolsAdded?: Array<{ name?: string }> } })
          .message ?? {};
      const sections = Object.entries(message.sections ?? {});
      const tools = (message.toolsAdded ?? []).map((tool) => tool.name).filter(Boolean);
      const summary = ["system prompt", ...(tools.length ? [`tools: ${tools.join(", ")}`] : [])].join(" · ");
      return h(
        "li",
        { class: "msg system", ...at },
        h(
          "details",
          null,
          h("summary", null, summary),
          typeof message.content === "string" && message.content ? h("p", null, message.content) : null,
          ...sections.map(([name, text]) => h("p", null, h("strong", null, `${name}: `), String(text))),
        ),
      );
    }
    case "pi.run-failure": {
      // Durable: the answer stays failed after any reload and any later run.
      const { reason, error } = entry.payload as unknown as RunFailureEntryPayload;
      return h("li", { class: "msg notice-entry", ...at }, failureNotice({ reason, message: error }, "run"));
    }
    case ASK_BEFORE_WRITING.kind:
      return h(
        "li",
        { class: "msg system switch-entry", ...at },
        askBeforeWriting([entry])
          ? "Ask before writing files: on. From here on a call that writes, edits or deletes a file waits for your decision."
          : "Ask before writing files: off. The agent writes files without asking.",
      );
    default:
      return h("li", { class: "msg system", ...at }, `${entry.kind} ${compactJson(entry.payload)}`);
  }
}

/** A long conversation opens on its last page; this loads the page before the first shown entry. */
function loadOlderButton(): HTMLElement {
  const button = h("button", { type: "button", class: "ghost" }, "Show earlier messages");
  button.addEventListener(
    "click",
    app.attempt(async () => {
      const height = scroller.scrollHeight;
      await conversation()?.loadOlder?.();
      scroller.scrollTop += scroller.scrollHeight - height; // keep the reader where they were
    }, "loading earlier messages"),
  );
  return h("li", { class: "load-older" }, button);
}

/** Entries are append-only: new ones go at the end, older pages loaded on demand go in front. */
export function renderEntries(view: ConversationViewState): void {
  // On the first render nothing is shown yet, so nothing counts as older: every entry is placed in order.
  const shownId = log.querySelector<HTMLElement>("li[data-entry-id]")?.dataset.entryId;
  const firstShown = shownId === undefined ? -Infinity : Number(shownId);
  const older: HTMLElement[] = [];
  for (const entry of view.entries) {
    if (renderedEntries.has(entry.id)) continue;
    renderedEntries.add(entry.id);
    const element = renderEntry(entry);
    if (!element) continue;
    if (entry.id < firstShown) {
      older.push(element);
      continue;
    }
    // A summary stands where the messages it replaced end: before the first message it kept.
    const firstKept =
      entry.kind === "pi.compaction"
        ? log.querySelector(`:scope > [data-entry-id="${(entry.payload as unknown as CompactionEntryPayload).firstKept}"]`)
        : null;
    if (firstKept) {
      firstKept.before(element);
      for (let earlier = element.previousElementSibling; earlier; earlier = earlier.previousElementSibling)
        (earlier as HTMLElement).dataset.summarized = "";
    } else log.append(element);
  }
  log.querySelector(".load-older")?.remove();
  log.prepend(...older);
  if (view.hasOlder) log.prepend(loadOlderButton());
}
