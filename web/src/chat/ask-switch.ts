import type { ConversationViewState } from "pi-durable-web";
import type { HarnessClient } from "pi-durable-web/client";
import { ASK_BEFORE_WRITING, type AskBeforeWritingData, askBeforeWriting } from "../../../worker/protocol.ts";
import { app } from "../app.ts";
import { conversation } from "../conversation.ts";
import { byId } from "../dom.ts";

/**
 * The "ask before writing files" switch. Flipping it writes an entry to the conversation (worker/protocol.ts:
 * ASK_BEFORE_WRITING); the file tools' approval rule reads the last one, so the switch is durable, the same in
 * every tab, and says exactly what the rule will do. It changes between turns: while the agent works (or a
 * call waits for a decision) it is disabled, so a flip never waits in the queue behind the run.
 */
const toggle = byId<HTMLInputElement>("ask-before-writing");
let on = false;
/** The switch entry may be older than the page of entries the view holds: then it is asked for once. */
let askedFor: HarnessClient | undefined;
let submitting = false;

export function renderAskSwitch(view: ConversationViewState, client: HarnessClient): void {
  const latest = view.entries.findLast((entry) => entry.kind === ASK_BEFORE_WRITING.kind);
  if (latest) on = askBeforeWriting([latest]);
  else if (view.hasOlder && askedFor !== client) {
    askedFor = client;
    void client
      .query(
        "SELECT record FROM entries WHERE conversation_id = ? AND kind = ? ORDER BY id DESC LIMIT 1",
        conversation()?.id ?? -1,
        ASK_BEFORE_WRITING.kind,
      )
      .then((rows) => {
        const record = rows[0] ? JSON.parse(String(rows[0].record)) : undefined;
        if (record && app.isCurrent(client)) on = askBeforeWriting([record]);
        if (!submitting) toggle.checked = on;
      })
      .catch(() => {});
  } else if (!view.hasOlder) on = false;
  if (!submitting) toggle.checked = on;
  toggle.disabled = submitting || view.busy;
  toggle.closest("label")!.title = view.busy
    ? "Changes between turns: wait until the agent is done (or decide the call that waits)."
    : "Ask before the agent writes, edits or deletes a file: each such call waits for Approve or Deny.";
  document.body.dataset.askBeforeWriting = String(on);
}

toggle.addEventListener(
  "change",
  app.attempt(async () => {
    const current = conversation();
    if (!current) return;
    submitting = true;
    toggle.disabled = true;
    const data: AskBeforeWritingData = { on: toggle.checked };
    try {
      const id = await current.client.submit(current.id, { type: "write", entry: { kind: ASK_BEFORE_WRITING.kind, data: { ...data } } });
      await current.client.waitForSubmission(id);
    } finally {
      submitting = false;
      const view = conversation()?.view;
      if (view && app.isCurrent(current.client)) renderAskSwitch(view, current.client);
      else toggle.checked = on;
    }
  }, "the ask-before-writing switch"),
);
