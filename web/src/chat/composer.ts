import type { ConversationViewState } from "pi-durable-web";
import type { HarnessClient } from "pi-durable-web/client";
import { app } from "../app.ts";
import { conversation, ensureModel, isOfflineModel } from "../conversation.ts";
import { byId, h } from "../dom.ts";
import { showToast } from "../log.ts";

/**
 * The composer: the message box and its buttons (Send, or Queue / steer while the agent answers; Stop;
 * Compact; the offline model's suggestions), and the queue of inputs sent while it answers.
 */
const scroller = byId("chat-scroll");
const input = byId<HTMLTextAreaElement>("chat-input");
const sendButton = byId<HTMLButtonElement>("send");
const stopButton = byId<HTMLButtonElement>("stop");
const whenBusyLabel = byId("when-busy-label");
const whenBusy = byId<HTMLSelectElement>("when-busy");
const inbox = byId("inbox");
const inboxList = byId<HTMLOListElement>("inbox-list");
const inboxHeading = byId("inbox-heading");

/** Texts of inputs this page submitted, by submission id (queued ones are shown before they become entries). */
const drafts = new Map<number, string>();
const inboxTexts = new Map<number, string>();
const askedInbox = new Set<number>();
let busy = false;
let renderedInbox: ConversationViewState["inbox"] | undefined;

/** A new worker: the queue is rendered again from its first view. */
export function clearComposer(): void {
  renderedInbox = undefined;
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

/** The queue and the buttons, as the view says (busy: Queue instead of Send, Stop shown). */
export function renderComposer(view: ConversationViewState, client: HarnessClient): void {
  // Live frames come up to 60 times a second; the inbox changes only with a commit (the store keeps an
  // unchanged document's object, so identity tells).
  if (view.inbox !== renderedInbox) renderInbox(view, client);
  renderedInbox = view.inbox;
  // One intent, one approval: what is queued is answered after the decision, never beside it.
  inboxHeading.textContent = view.live.tools?.some((slot) => slot.status === "awaiting-approval")
    ? "Queued behind the call that waits for your decision"
    : "Queued";
  busy = view.busy;
  stopButton.hidden = !busy;
  whenBusyLabel.hidden = !busy;
  sendButton.textContent = busy ? "Queue" : "Send";
  document.body.dataset.busy = String(busy);
  byId("suggestions").hidden = !isOfflineModel(view.agent.model);
}

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
