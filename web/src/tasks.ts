import type { Inspection, TaskInspectionState, TaskRecord } from "pi-durable-web";
import type { HarnessClient } from "pi-durable-web/client";
import { app } from "./app.ts";
import { byId, clock, h } from "./dom.ts";

/**
 * The task panel: the live task graph (`watchTasks`, pushed after commits) and the latest finished tasks
 * (read-only SQL, refreshed with it). Each row: id, kind, status, phase, restarts, replay, and what the task
 * waits on, sleeps until or is blocked by.
 */
const list = byId<HTMLUListElement>("tasks");
const emptyNote = byId("tasks-empty");
const schedulingNote = byId("scheduling");
const count = byId("tasks-count");
const FINISHED_LIMIT = 30;

type Row = { record: TaskRecord; state?: TaskInspectionState };

function outcomeText(record: TaskRecord): string {
  const state = record.state;
  if (state.status !== "terminal" && state.status !== "completing") return "";
  const outcome = state.outcome;
  switch (outcome.status) {
    case "completed":
      return `completed: ${JSON.stringify(outcome.result)}`;
    case "failed":
    case "faulted":
      return `${outcome.status}: ${outcome.error.message}${outcome.error.detail === undefined ? "" : ` ${JSON.stringify(outcome.error.detail)}`}`;
    case "aborted":
      return `aborted${outcome.reason ? `: ${outcome.reason}` : ""}`;
    case "orphaned":
      return `orphaned: ${outcome.reason}`;
  }
}

function stateText(state: TaskInspectionState | undefined): string {
  switch (state?.kind) {
    case "running":
      return "running now";
    case "ready":
      return state.migrates ? "ready (will migrate)" : "ready to run";
    case "waiting":
      return `waits on ${state.on.map((id) => `#${id}`).join(", ")}`;
    case "sleeping":
      return state.until === undefined ? "waiting for a decision" : `sleeping until ${clock(state.until)}`;
    case "completing":
      return "completing";
    case "blocked":
      return `blocked: ${state.reason} — ${state.message}`;
    default:
      return "";
  }
}

function facts(record: TaskRecord): string[] {
  const shown: string[] = [];
  const state = record.state;
  if ("checkpoint" in state) {
    const { phase, replay, ...rest } = state.checkpoint;
    shown.push(`phase ${phase}`);
    for (const [key, value] of Object.entries(rest)) {
      if (value === null || typeof value === "object") continue; // arguments and other structures: see Storage
      shown.push(`${key} ${String(value)}`);
    }
    if (replay !== undefined) shown.push(`replay ${String(replay)}`);
  }
  if (record.restarts) shown.push(`restarts ${record.restarts}`);
  if (record.memos && Object.keys(record.memos).length > 0) shown.push(`memos ${Object.keys(record.memos).join(", ")}`);
  if (record.abortRequested && record.state.status !== "terminal") shown.push("abort requested");
  return shown;
}

function renderRow({ record, state }: Row): HTMLLIElement {
  const status = record.state.status;
  const detail = status === "terminal" || status === "completing" ? outcomeText(record) : stateText(state);
  const outcome =
    status === "terminal" || status === "completing" ? (record.state as { outcome: { status: string } }).outcome.status : undefined;
  return h(
    "li",
    {
      class: "task",
      "data-task-id": String(record.id),
      "data-status": status,
      "data-kind": record.kind,
      ...(outcome ? { "data-outcome": outcome } : {}),
    },
    h("div", { class: "task-head" }, h("span", { class: "task-id" }, `#${record.id}`), " ", h("span", { class: "task-kind" }, record.kind)),
    h(
      "div",
      { class: "task-summary" },
      h("span", { class: "status-badge", "data-status": status, ...(outcome ? { "data-outcome": outcome } : {}) }, status),
      detail ? ` ${detail}` : "",
    ),
    h("div", { class: "task-facts" }, ...facts(record).map((fact) => h("span", { class: "fact" }, fact))),
  );
}

let live: Inspection | undefined;
let finished: TaskRecord[] = [];
const finishedListeners = new Set<(finished: readonly TaskRecord[]) => void>();

/** Calls `listener` with the latest finished tasks (newest first) each time they are read from the database. */
export function onFinishedTasks(listener: (finished: readonly TaskRecord[]) => void): void {
  finishedListeners.add(listener);
  listener(finished);
}

function render(): void {
  const rows = new Map<number, Row>();
  for (const { record, state } of live?.tasks ?? []) rows.set(record.id, { record, state });
  for (const record of finished) rows.set(record.id, { record }); // terminal is final: it wins over an older live view
  const sorted = [...rows.values()].sort((a, b) => b.record.id - a.record.id);
  list.replaceChildren(...sorted.map(renderRow));
  emptyNote.hidden = sorted.length > 0;
  const running = live?.tasks.length ?? 0;
  count.textContent = running > 0 ? String(running) : "";
  schedulingNote.textContent = app.scheduling ? `scheduling: ${app.scheduling}` : "";
}

// Finished tasks come from the database; one query at a time, the latest request wins.
let refreshing: Promise<void> | undefined;
let again = false;
function refreshFinished(client: HarnessClient): void {
  if (refreshing) {
    again = true;
    return;
  }
  refreshing = (async () => {
    if (client.status.kind !== "ready") return;
    const rows = await client
      .query(`SELECT record FROM tasks WHERE status = 'terminal' ORDER BY id DESC LIMIT ${FINISHED_LIMIT}`)
      .catch(() => undefined);
    if (!rows || !app.isCurrent(client)) return;
    finished = rows.map((row) => JSON.parse(String(row.record)) as TaskRecord);
    render();
    for (const listener of finishedListeners) listener(finished);
  })().finally(() => {
    refreshing = undefined;
    if (again && app.isCurrent(client)) {
      again = false;
      refreshFinished(client);
    }
  });
}

app.onScheduling(() => render());
app.onClient(() => {
  live = undefined;
  finished = [];
  render();
  for (const listener of finishedListeners) listener(finished);
});
// Subscribed once the database is open: the worker then sends the current graph at once, and after commits.
app.onReady((client) => {
  void client
    .watchTasks((inspection) => {
      if (!app.isCurrent(client)) return;
      live = inspection;
      app.setScheduling(client, inspection.scheduling);
      render();
      refreshFinished(client);
    })
    .catch(() => {});
  refreshFinished(client);
});
