import type { Json, ToolResultEntryPayload, ToolSlotApproval, ToolSlotView } from "pi-durable-web";
import { conversation } from "../conversation.ts";
import { clock, errorText, h } from "../dom.ts";

/**
 * The approval part of a tool card. While the call waits for a person it shows what the tool would do (its
 * exact arguments, from the waiting task), how long it has waited, an optional reason, and Approve / Deny;
 * once decided, who decided and why. Everything comes from the committed view, so the card is back after a
 * reload and is the same in every tab; a decision is one `client.decide` bound to the call's id and
 * arguments, and a second one (from another tab, say) is refused with the library's typed error, shown here.
 */
type Decided = Pick<ToolSlotApproval, "reason" | "by" | "decidedAt"> & { approved: boolean };

/** Shows `slot`'s approval on `card`: the question while it waits, the decision once made. */
export function showApproval(card: HTMLElement, slot: ToolSlotView): void {
  const approval = slot.approval;
  const waiting = slot.status === "awaiting-approval" && approval?.arguments !== undefined;
  const shown = card.querySelector<HTMLElement>(".approval");
  if (waiting && shown?.dataset.argumentsHash !== approval.argumentsHash) {
    shown?.remove();
    card.querySelector(".tool-head")!.after(question(card, slot.callId, approval));
    tickAges();
  } else if (!waiting) shown?.remove();
  if (approval && approval.status !== "awaiting" && approval.decidedAt !== undefined)
    showDecision(card, { ...approval, approved: approval.status === "approved" });
  else if (approval?.status === "withdrawn") showOutcome(card, "withdrawn", "Withdrawn before a decision: the run was stopped.");
}

/** The decision a result entry records (the call ended: approved and run, or denied). */
export function showResultDecision(card: HTMLElement, decision: ToolResultEntryPayload["approval"]): void {
  card.querySelector(".approval")?.remove();
  if (decision) showDecision(card, decision);
}

function showDecision(card: HTMLElement, decision: Decided): void {
  // A rule's approval while the switch is off is the usual case: nothing to say.
  if (decision.by === "rule" && decision.approved) return;
  const who = decision.by === "expiry" ? "by its expiry" : decision.by === "rule" ? "by its approval rule" : "by a person";
  const when = decision.decidedAt === undefined ? "" : ` at ${clock(decision.decidedAt)}`;
  const why = decision.reason ? `: ${decision.reason}` : "";
  showOutcome(card, decision.approved ? "approved" : "denied", `${decision.approved ? "Approved" : "Denied"} ${who}${when}${why}`);
}

function showOutcome(card: HTMLElement, outcome: string, text: string): void {
  let line = card.querySelector<HTMLElement>(".approval-outcome");
  if (!line) {
    line = h("p", { class: "approval-outcome", role: "status" });
    card.querySelector(".tool-head")!.after(line);
  }
  line.dataset.outcome = outcome;
  line.textContent = text;
}

function question(card: HTMLElement, callId: string, approval: ToolSlotApproval): HTMLElement {
  const reason = h("input", {
    class: "approval-reason",
    type: "text",
    maxlength: 500,
    placeholder: "Reason (optional)",
    title: "The model reads the reason with your decision.",
    "aria-label": "Reason for the decision (optional)",
  });
  const approve = h("button", { type: "button", class: "primary approval-approve" }, "Approve");
  const deny = h("button", { type: "button", class: "danger approval-deny" }, "Deny");
  const decide = (approved: boolean) => async () => {
    const current = conversation();
    if (!current) return;
    approve.disabled = deny.disabled = reason.disabled = true;
    card.querySelector(".approval-error")?.remove();
    const text = reason.value.trim();
    try {
      await current.client.decide(current.id, callId, {
        approved,
        ...(text ? { reason: text } : {}),
        argumentsHash: approval.argumentsHash,
      });
    } catch (error) {
      showDecideError(card, error);
      approve.disabled = deny.disabled = reason.disabled = false;
    }
  };
  approve.addEventListener("click", decide(true));
  deny.addEventListener("click", decide(false));
  reason.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      deny.click(); // a reason is what a denial usually comes with
    }
  });
  const args = Object.entries(approval.arguments ?? {});
  return h(
    "div",
    { class: "approval", role: "group", "aria-label": "Approve this tool call?", "data-arguments-hash": approval.argumentsHash },
    h(
      "p",
      { class: "approval-ask" },
      h("strong", null, "Waiting for your decision."),
      " Nothing of this call has run. ",
      h("span", { class: "approval-age", "data-requested-at": String(approval.requestedAt) }, ageText(approval.requestedAt)),
      approval.expiresAt === undefined ? null : ` Denied by itself at ${clock(approval.expiresAt)}.`,
    ),
    args.length === 0
      ? h("p", { class: "approval-none" }, "(no arguments)")
      : h(
          "dl",
          { class: "approval-args" },
          ...args.flatMap(([name, value]) => [h("dt", null, name), h("dd", null, h("pre", null, shown(value)))]),
        ),
    h("div", { class: "approval-actions" }, reason, approve, deny),
  );
}

/** A typed error of `decide` (AlreadyDecided, ApprovalWithdrawn, ApprovalMismatch…): its name and what to do. */
function showDecideError(card: HTMLElement, error: unknown): void {
  const { name, message } = errorText(error);
  card.querySelector(".approval-error")?.remove();
  card
    .querySelector(".tool-head")!
    .after(h("p", { class: "approval-error", role: "alert", "data-error-name": name }, h("strong", null, name), ` ${message}`));
}

/** An argument as the person reads it: a string as it is (line breaks and all), anything else as JSON. */
function shown(value: Json): string {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

function ageText(requestedAt: number): string {
  const seconds = Math.max(0, Math.round((Date.now() - requestedAt) / 1000));
  if (seconds < 5) return "Asked just now.";
  if (seconds < 60) return `Asked ${seconds} s ago.`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `Asked ${minutes} min ago.`;
  const hours = Math.floor(minutes / 60);
  return hours < 48 ? `Asked ${hours} h ago.` : `Asked ${Math.floor(hours / 24)} days ago.`;
}

let ageTicker: ReturnType<typeof setInterval> | undefined;

/** The ages count on between views (a waiting call commits nothing while it waits). */
function tickAges(): void {
  if (ageTicker !== undefined) return;
  ageTicker = setInterval(() => {
    const ages = document.querySelectorAll<HTMLElement>(".approval-age");
    for (const age of ages) age.textContent = ageText(Number(age.dataset.requestedAt));
    if (ages.length === 0) {
      clearInterval(ageTicker);
      ageTicker = undefined;
    }
  }, 1000);
}
