import type { ConversationViewState } from "pi-durable-web";
import type { HarnessClient } from "pi-durable-web/client";
import { app } from "./app.ts";
import { renderAskSwitch } from "./chat/ask-switch.ts";
import { clearComposer, renderComposer } from "./chat/composer.ts";
import { clearLive, renderLive } from "./chat/live.ts";
import { clearTranscript, renderEntries } from "./chat/transcript.ts";
import { onConversation } from "./conversation.ts";
import { byId } from "./dom.ts";

/**
 * The chat, one view at a time: the committed transcript (chat/transcript.ts, with the tool cards of
 * chat/tool-cards.ts and their approval cards), the live part of the run (chat/live.ts), the composer with its
 * queue (chat/composer.ts) and the "ask before writing files" switch (chat/ask-switch.ts). The transcript's work is done per commit; the live area's per view.
 */
const scroller = byId("chat-scroll");
const empty = byId("chat-empty");

let renderedFor: HarnessClient | undefined;
/** The entries last placed (the store keeps the array while only live text changes). */
let renderedList: ConversationViewState["entries"] | undefined;

function nearBottom(): boolean {
  return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 80;
}

function render(view: ConversationViewState, client: HarnessClient): void {
  const stick = nearBottom();
  if (renderedFor !== client) {
    renderedFor = client;
    renderedList = undefined;
    clearComposer();
    clearTranscript();
  }
  // A live frame changes only the live area: the transcript's work is done per commit, not per token.
  if (view.entries !== renderedList) {
    renderedList = view.entries;
    renderEntries(view);
  }
  renderLive(view);
  renderAskSwitch(view, client);
  renderComposer(view, client);
  empty.hidden = view.entries.length > 0 || view.busy;
  if (stick) scroller.scrollTop = scroller.scrollHeight;
}

onConversation(render);
app.onClient(() => {
  // A new worker: its view replaces everything (the history comes from the database).
  clearLive();
});
