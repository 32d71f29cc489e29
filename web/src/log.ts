import type { Report } from "pi-durable-web";
import { app } from "./app.ts";
import { byId, clock, h, type Child } from "./dom.ts";

/**
 * Reports from the harness (task_faulted, task_interrupted, error) and errors from this page's own calls.
 * Each report keeps its JSON; errors also pop up as a short toast.
 */
const reports = byId<HTMLUListElement>("reports");
const errors = byId<HTMLUListElement>("errors");
const empty = byId("log-empty");
const count = byId("log-count");
const toasts = byId("toasts");
let unseen = 0;

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

function addReport(report: Report): void {
  const message = "message" in report ? report.message : undefined;
  reports.prepend(
    h(
      "li",
      { class: "log-item", "data-kind": report.kind },
      h("div", { class: "log-top" }, h("span", { class: "badge", "data-kind": report.kind }, report.kind), h("span", { class: "log-time" }, clock(Date.now()))),
      h("p", { class: "log-title" }, reportTitle(report)),
      message ? h("p", { class: "log-message" }, message) : null,
      h("details", null, h("summary", null, "JSON"), h("code", { class: "report-json" }, JSON.stringify(report))),
    ),
  );
  unseen += 1;
  updateCount();
}

app.onClient((client) => {
  void client
    .onReport((report) => {
      if (app.isCurrent(client)) addReport(report);
    })
    .catch(() => {});
});

app.onError(({ name, message, context }) => {
  errors.prepend(
    h(
      "li",
      { class: "log-item is-error", "data-name": name },
      h("div", { class: "log-top" }, h("span", { class: "badge", "data-kind": "error" }, context ?? "page"), h("span", { class: "log-time" }, clock(Date.now()))),
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
  reports.replaceChildren();
  errors.replaceChildren();
  seen();
});
updateCount();
