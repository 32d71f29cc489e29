import type { Report } from "pi-durable-web";
import { app } from "./app.ts";
import { byId, type Child, clock, h } from "./dom.ts";

/**
 * Reports from the harness (task_faulted, task_interrupted, error) and errors from this page's own calls.
 * Each report keeps its JSON; errors also pop up as a short toast. Reports are what a person wants to read
 * after a reload, so they are kept in this tab's storage (localStorage, like the printed lines) with the
 * load they came from, and the Log shows them again on the next load, each marked with its load.
 */
const reports = byId<HTMLUListElement>("reports");
const errors = byId<HTMLUListElement>("errors");
const empty = byId("log-empty");
const count = byId("log-count");
const toasts = byId("toasts");
let unseen = 0;

const JOURNAL = "pi-durable-web:reports";
const LOADS = "pi-durable-web:loads";
const KEPT = 200;

interface Kept {
  /** The page load that received it: 1 for the first load of this browser profile, counting up. */
  load: number;
  /** When this page received it (ms since the epoch). */
  at: number;
  report: Report;
}

/** This page load's number: one more than the last load's. */
const load = Number(localStorage.getItem(LOADS) ?? "0") + 1;
localStorage.setItem(LOADS, String(load));

function journal(): Kept[] {
  try {
    const kept = JSON.parse(localStorage.getItem(JOURNAL) ?? "[]") as unknown;
    return Array.isArray(kept) ? (kept as Kept[]) : [];
  } catch {
    return [];
  }
}

function keep(entry: Kept): void {
  localStorage.setItem(JOURNAL, JSON.stringify([...journal(), entry].slice(-KEPT)));
}

function updateCount(): void {
  empty.hidden = reports.children.length + errors.children.length > 0;
  count.textContent = unseen > 0 ? String(unseen) : "";
}

function seen(): void {
  unseen = 0;
  updateCount();
}
byId("tab-log").addEventListener("click", seen);

function reportTitle(report: Report): string {
  switch (report.kind) {
    case "task_faulted":
      return `task #${report.taskId} (${report.taskKind}) faulted: ${report.reason}`;
    case "task_interrupted":
      return `task #${report.taskId} (${report.taskKind}) interrupted: ${report.reason}`;
    case "error": {
      const error = report.error as { name?: string; message?: string } | undefined;
      return `error${report.taskId !== undefined ? ` in task #${report.taskId}` : ""}: ${error?.name ?? "Error"}: ${error?.message ?? String(report.error)}`;
    }
  }
}

function loadLabel(from: number): string {
  return from === load ? `load ${from} (this one)` : `load ${from} (${load - from} reload${load - from === 1 ? "" : "s"} ago)`;
}

function showReport({ load: from, at, report }: Kept): void {
  const message = "message" in report ? report.message : undefined;
  reports.prepend(
    h(
      "li",
      { class: "log-item", "data-kind": report.kind, "data-load": String(from), ...(from === load ? {} : { "data-earlier": "" }) },
      h(
        "div",
        { class: "log-top" },
        h("span", { class: "badge", "data-kind": report.kind }, report.kind),
        h("span", { class: "log-load" }, loadLabel(from)),
        h("span", { class: "log-time" }, clock(at)),
      ),
      h("p", { class: "log-title" }, reportTitle(report)),
      message ? h("p", { class: "log-message" }, message) : null,
      h("details", null, h("summary", null, "JSON"), h("code", { class: "report-json" }, JSON.stringify(report))),
    ),
  );
}

// The earlier loads' reports first (oldest at the bottom), then this load's as they arrive.
for (const entry of journal()) showReport(entry);

app.onClient((client) => {
  void client
    .onReport((report) => {
      if (!app.isCurrent(client)) return;
      const entry = { load, at: Date.now(), report };
      keep(entry);
      showReport(entry);
      unseen += 1;
      updateCount();
    })
    .catch(() => {});
});

app.onError(({ name, message, context }) => {
  errors.prepend(
    h(
      "li",
      { class: "log-item is-error", "data-name": name },
      h(
        "div",
        { class: "log-top" },
        h("span", { class: "badge", "data-kind": "error" }, context ?? "page"),
        h("span", { class: "log-time" }, clock(Date.now())),
      ),
      h("p", { class: "log-title error-text" }, `${name}: ${message}`),
    ),
  );
  unseen += 1;
  updateCount();
  showToast(h("strong", null, name), ` ${message}`);
});

/** A short message in the corner that goes away by itself. */
export function showToast(...content: Child[]): void {
  const toast = h("div", { class: "toast", role: "alert" }, ...content);
  toasts.append(toast);
  setTimeout(() => toast.remove(), 6000);
}

byId("log-clear").addEventListener("click", () => {
  localStorage.removeItem(JOURNAL);
  reports.replaceChildren();
  errors.replaceChildren();
  seen();
});
updateCount();
