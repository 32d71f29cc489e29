import type { ConversationViewState, LiveView } from "pi-durable-web";
import { byId, h } from "../dom.ts";
import { assistantBody, failureNotice } from "./message.ts";
import { applySlot } from "./tool-cards.ts";

/**
 * The live part of the run, re-rendered on every view: the streamed partial answer, the typing dots, retries
 * counting down, compactions and how one failed; and the live state of the round's tool cards.
 */
const liveArea = byId("chat-live");

/** Empties the live area (a new worker: its first view says what is live). */
export function clearLive(): void {
  liveArea.replaceChildren();
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

export function renderLive(view: ConversationViewState): void {
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
