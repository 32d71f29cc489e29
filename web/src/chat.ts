import type {
  AssistantEntryPayload,
  CompactionEntryPayload,
  ConversationViewState,
  EntryRecord,
  LiveFailure,
  LiveView,
  RunFailureEntryPayload,
  ToolResultEntryPayload,
  ToolSlotView,
  UserEntryPayload,
} from "pi-durable-web";
import type { HarnessClient } from "pi-durable-web/client";
import { app } from "./app.ts";
import { conversation, ensureModel, isOfflineModel, onConversation } from "./conversation.ts";
import { byId, h } from "./dom.ts";
import { showToast } from "./log.ts";
import { renderMarkdown } from "./markdown.ts";

/**
 * The chat: the committed transcript (entries are append-only, so each is rendered once), tool cards that
 * follow their live slot until their result entry arrives, and the live part of the run (the streamed
 * partial answer, retries, how a run ended without an answer), re-rendered on every view. Model and tool
 * text only ever reaches the page as text nodes (see dom.ts and markdown.ts).
 */
type AssistantMessage = AssistantEntryPayload["message"];
type ToolCall = Extract<AssistantMessage["content"][number], { type: "toolCall" }>;

const scroller = byId("chat-scroll");
const log = byId<HTMLOListElement>("chat-log");
const liveArea = byId("chat-live");
const empty = byId("chat-empty");
const input = byId<HTMLTextAreaElement>("chat-input");
const sendButton = byId<HTMLButtonElement>("send");
const stopButton = byId<HTMLButtonElement>("stop");
const whenBusyLabel = byId("when-busy-label");
const whenBusy = byId<HTMLSelectElement>("when-busy");
const inbox = byId("inbox");
const inboxList = byId<HTMLOListElement>("inbox-list");

let renderedFor: HarnessClient | undefined;
const renderedEntries = new Set<number>();
const toolCards = new Map<string, HTMLElement>();
/** Texts of inputs this page submitted, by submission id (queued ones are shown before they become entries). */
const drafts = new Map<number, string>();
const inboxTexts = new Map<number, string>();
const askedInbox = new Set<number>();
let busy = false;
let renderedInbox: ConversationViewState["inbox"] | undefined;
/** The entries last placed (the store keeps the array while only live text changes). */
let renderedList: ConversationViewState["entries"] | undefined;

const TOOL_CODES: Record<string, string> = {
  interrupted: "interrupted — may have partially run",
  restart_limit: "restart limit reached — not run again",
  aborted: "aborted",
  tool_unavailable: "tool unavailable",
  invalid_arguments: "invalid arguments",
  blocked: "blocked",
  tool_error: "error",
};

const FAILURES: Record<string, string> = {
  interrupted: "Interrupted: the model request was cut by a crash and the retries ran out. The input is unanswered; send it again.",
  restart_limit: "Stopped at the restart limit: this run was cut off too many times in a row. The input is unanswered; send it again.",
  aborted: "Stopped: the run was aborted.",
  model_error: "The model failed.",
  no_model: "No model is available for this conversation.",
  faulted: "The run failed.",
};

function textOf(content: UserEntryPayload["message"]["content"] | ToolResultEntryPayload["message"]["content"]): string {
  if (typeof content === "string") return content;
  return content.map((part) => (part.type === "text" ? part.text : `[${part.type}]`)).join("");
}

function compactJson(value: unknown): string {
  const text = JSON.stringify(value) ?? "";
  return text.length > 160 ? `${text.slice(0, 157)}…` : text;
}

function nearBottom(): boolean {
  return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 80;
}

// ---- tool cards ------------------------------------------------------------------------------------------
function toolCard(call: { id: string; name: string; arguments?: unknown }): HTMLElement {
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
function applySlot(slot: ToolSlotView, streamed: string | undefined): void {
  const card = toolCards.get(slot.callId);
  if (!card || card.dataset.result === "") return; // the result entry is what counts once written
  setToolStatus(
    card,
    slot.status === "done" ? "pending" : slot.status,
    slot.status === "running" ? "running" : slot.status === "pending" ? "waiting" : "finishing",
  );
  const output = streamed ?? slot.output;
  if (output) {
    const section = card.querySelector<HTMLElement>(".tool-output-section")!;
    section.hidden = false;
    const pre = section.querySelector("pre")!;
    pre.textContent = output;
    pre.dataset.durable = String(streamed === undefined);
  }
}

/** A harness-written part of a result: `<harness>\n[error] message\n</harness>` (the model gets it as is). */
const HARNESS_NOTE = /^<harness>\n\[error\] ([\s\S]*)\n<\/harness>$/;

/** What the person reads for a result the harness wrote (the model still gets the harness's own text). */
const TOOL_NOTICES: Record<string, string> = {
  interrupted:
    "Cut off by a reload while it ran. It may have partially run, so it was not run again; any output above is what it reported before the cut.",
  restart_limit: "Cut off too many times in a row, so it was not run again.",
  aborted: "Stopped: the run was aborted.",
};

function applyResult(card: HTMLElement, payload: ToolResultEntryPayload): void {
  const { message, code } = payload;
  card.dataset.result = "";
  if (code) card.dataset.code = code;
  card.classList.toggle("is-error", message.isError);
  setToolStatus(card, "done", code ? (TOOL_CODES[code] ?? code) : message.isError ? "error" : "done");
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

// ---- entries -------------------------------------------------------------------------------------------
function assistantBody(message: AssistantMessage, streaming: boolean): HTMLElement {
  const body = h("div", { class: "msg-body" });
  for (const part of message.content) {
    if (part.type === "text") {
      if (part.text) body.append(h("div", { class: "md" }, renderMarkdown(part.text)));
    } else if (part.type === "thinking") {
      if (part.thinking) body.append(h("details", { class: "thinking" }, h("summary", null, "thinking"), h("p", null, part.thinking)));
    } else if (part.type === "toolCall") {
      body.append(
        streaming
          ? h(
              "div",
              { class: "tool is-forming" },
              h(
                "div",
                { class: "tool-head" },
                h("span", { class: "tool-icon", "aria-hidden": "true" }, "⚙"),
                h("code", { class: "tool-name" }, part.name),
                h("span", { class: "tool-status" }, "calling…"),
              ),
            )
          : toolCard(part as ToolCall),
      );
    }
  }
  return body;
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
      const existing = toolCards.get(payload.message.toolCallId);
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

// ---- the live part of the run ----------------------------------------------------------------------------
function failureNotice(failure: Pick<LiveFailure, "reason" | "message">, what: "run" | "compaction"): HTMLElement {
  const text =
    what === "compaction"
      ? `Compaction failed (${failure.reason}).`
      : (FAILURES[failure.reason] ?? `The run ended without an answer (${failure.reason}).`);
  return h(
    "div",
    { class: "notice warn run-failure", "data-reason": failure.reason, role: "status" },
    h("strong", null, text),
    failure.message ? h("span", null, ` ${failure.message}`) : null,
  );
}

/** "Retrying in 2 s — attempt 2 of 4, the previous request was cut off by a reload." */
function retryText(generation: NonNullable<LiveView["generation"]>, now: number): string {
  const retry = generation.retry!;
  const seconds = Math.ceil((retry.at - now) / 1000);
  const when = seconds > 0 ? `Retrying in ${seconds} s` : "Retrying now";
  const attempt = `attempt ${generation.attempt}${retry.maxAttempts ? ` of ${retry.maxAttempts}` : ""}`;
  const cause =
    retry.cause === "interrupted" ? "the previous request was cut off by a reload" : `the previous request failed: ${retry.error}`;
  return `${when} — ${attempt}, ${cause}.`;
}

let retryTicker: ReturnType<typeof setInterval> | undefined;

/** The retry notice counts down on its own between views (the next view comes with the next attempt). */
function tickRetry(generation: LiveView["generation"]): void {
  clearInterval(retryTicker);
  retryTicker = undefined;
  if (!generation?.retry) return;
  retryTicker = setInterval(() => {
    const notice = liveArea.querySelector<HTMLElement>(".retry");
    if (notice) notice.textContent = retryText(generation, Date.now());
    else clearInterval(retryTicker);
  }, 250);
}

function renderLive(view: ConversationViewState): void {
  const live = view.live;
  const parts: HTMLElement[] = [];
  const generation = live.generation;
  // The streamed partial (not durable yet) when it is ahead of the committed one.
  const partial = view.streaming?.answer?.message ?? generation?.message;
  if (partial && partial.content.length > 0) {
    const durable = view.streaming?.answer === undefined;
    parts.push(
      h(
        "div",
        { class: "msg assistant streaming", "data-live": "generation", "data-durable": String(durable) },
        h("span", { class: "avatar", "aria-hidden": "true" }, "π"),
        assistantBody(partial, true),
      ),
    );
  } else if (view.busy && !live.tools?.some((slot) => slot.status !== "done")) {
    parts.push(h("div", { class: "typing", "aria-label": "The agent is working" }, h("span"), h("span"), h("span")));
  }
  if (generation?.retry)
    parts.push(
      h(
        "div",
        { class: "notice info retry", role: "status", "data-retry-at": String(generation.retry.at) },
        retryText(generation, Date.now()),
      ),
    );
  tickRetry(generation);
  if (live.compactions?.length) parts.push(h("div", { class: "notice info" }, "Summarizing earlier messages…"));
  if (live.compactionFailure) parts.push(failureNotice(live.compactionFailure, "compaction"));
  liveArea.replaceChildren(...parts);
  for (const slot of live.tools ?? []) applySlot(slot, slot.taskId === undefined ? undefined : view.streaming?.tools?.[slot.taskId]);
}

function renderInbox(view: ConversationViewState, client: HarnessClient): void {
  const items = view.inbox.items.filter((item) => item.mode !== "write");
  inbox.hidden = items.length === 0;
  const missing = items
    .filter((item) => !drafts.has(item.submissionId) && !inboxTexts.has(item.submissionId) && !askedInbox.has(item.submissionId))
    .map((item) => item.submissionId);
  if (missing.length > 0) {
    for (const id of missing) askedInbox.add(id); // one query per item, however often the view renders
    void client
      .query(
        `SELECT id, record ->> '$.payload.content' AS content FROM submissions WHERE id IN (${missing.map(() => "?").join(", ")})`,
        ...missing,
      )
      .then((rows) => {
        for (const row of rows) inboxTexts.set(Number(row.id), typeof row.content === "string" ? row.content : "(message)");
        const current = conversation();
        if (current?.view && app.isCurrent(client)) renderInbox(current.view, client);
      })
      .catch(() => {});
  }
  inboxList.replaceChildren(
    ...items.map((item) =>
      h(
        "li",
        { "data-submission-id": String(item.submissionId), "data-mode": item.mode },
        h("span", { class: "badge" }, item.mode === "steer" ? "steer" : "queued"),
        " ",
        drafts.get(item.submissionId) ?? inboxTexts.get(item.submissionId) ?? "…",
      ),
    ),
  );
}

/** Entries are append-only: new ones go at the end, older pages loaded on demand go in front. */
function renderEntries(view: ConversationViewState): void {
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

function render(view: ConversationViewState, client: HarnessClient): void {
  const stick = nearBottom();
  if (renderedFor !== client) {
    renderedFor = client;
    renderedEntries.clear();
    renderedInbox = undefined;
    renderedList = undefined;
    toolCards.clear();
    log.replaceChildren();
  }
  // A live frame changes only the live area: the transcript's work is done per commit, not per token.
  if (view.entries !== renderedList) {
    renderedList = view.entries;
    renderEntries(view);
  }
  renderLive(view);
  // Live frames come up to 60 times a second; the inbox changes only with a commit (the store keeps an
  // unchanged document's object, so identity tells).
  if (view.inbox !== renderedInbox) renderInbox(view, client);
  renderedInbox = view.inbox;
  empty.hidden = view.entries.length > 0 || view.busy;
  busy = view.busy;
  stopButton.hidden = !busy;
  whenBusyLabel.hidden = !busy;
  sendButton.textContent = busy ? "Queue" : "Send";
  document.body.dataset.busy = String(busy);
  byId("suggestions").hidden = !isOfflineModel(view.agent.model);
  if (stick) scroller.scrollTop = scroller.scrollHeight;
}

onConversation(render);
app.onClient(() => {
  // A new worker: its view replaces everything (the history comes from the database).
  liveArea.replaceChildren();
});

// ---- composer ----------------------------------------------------------------------------------------------
async function send(): Promise<void> {
  const text = input.value.trim();
  if (!text) return;
  const current = conversation();
  if (!current?.view) throw new Error("The database is not open yet: wait for “ready”.");
  await ensureModel(current.client, current.id, current.view);
  const id = await current.client.submit(current.id, {
    type: "input",
    content: text,
    requestId: crypto.randomUUID(),
    ...(busy ? { whenBusy: whenBusy.value as "followUp" | "steer" } : {}),
  });
  drafts.set(id, text);
  input.value = "";
  scroller.scrollTop = scroller.scrollHeight;
}

byId<HTMLFormElement>("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  app.attempt(send, "send")();
});
input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    byId<HTMLFormElement>("composer").requestSubmit();
  }
});
stopButton.addEventListener(
  "click",
  app.attempt(async () => {
    const current = conversation();
    if (current) await current.client.abortConversation(current.id);
  }, "stop"),
);
byId("compact").addEventListener(
  "click",
  app.attempt(async () => {
    const current = conversation();
    if (!current) return;
    const taskId = await current.client.compact(current.id);
    const task = await current.client.waitForTask(taskId);
    const outcome = task.state.status === "terminal" ? task.state.outcome : undefined;
    if (outcome?.status === "completed" && (outcome.result as { entryId?: number } | null)?.entryId === undefined) {
      showToast("Nothing to summarize yet: a compaction keeps the newest input and everything after it.");
    }
  }, "compact"),
);
for (const button of document.querySelectorAll<HTMLButtonElement>("#suggestions [data-say]")) {
  button.addEventListener("click", () => {
    input.value = button.dataset.say!;
    input.focus();
  });
}
