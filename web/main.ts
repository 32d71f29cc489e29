import { connectHarness, type HarnessClient, type HarnessStatus } from "../src/browser/client.ts";
import type { TaskRecord } from "../src/storage/records.ts";

// Settings travel in the worker's name: they must be known before the database opens. `?paused` opens the
// database without starting work, to look at what a crash left behind first.
const settings = JSON.parse(localStorage.getItem("pi-durable-web:settings") ?? "{}");
const paused = new URLSearchParams(location.search).has("paused");
// Every tab hears the print broadcast; only the tab whose worker printed a line records it, so a second tab
// (waiting for the database) does not write the transcript twice.
const tab = crypto.randomUUID();

const TRANSCRIPT = "pi-durable-web:transcript";
const transcript = (): string[] => JSON.parse(localStorage.getItem(TRANSCRIPT) ?? "[]");
new BroadcastChannel("pi-durable-web:print").onmessage = (event) => {
  if (event.data.tab !== tab) return;
  const lines = [...transcript(), String(event.data.line)];
  localStorage.setItem(TRANSCRIPT, JSON.stringify(lines));
  render();
};
window.addEventListener("storage", (event) => {
  if (event.key === TRANSCRIPT || event.key === null) render();
});

const statusElement = document.querySelector<HTMLElement>("#status")!;
const takeoverButton = document.querySelector<HTMLButtonElement>("#takeover")!;
const transcriptElement = document.querySelector<HTMLElement>("#transcript")!;
const tasksElement = document.querySelector<HTMLElement>("#tasks")!;
const errorsElement = document.querySelector<HTMLElement>("#errors")!;
const reportsElement = document.querySelector<HTMLElement>("#reports")!;

function render() {
  transcriptElement.textContent = transcript().join("\n");
}

function renderStatus(status: HarnessStatus) {
  document.body.dataset.status = status.kind;
  takeoverButton.disabled = status.kind !== "waiting-for-lock";
  statusElement.textContent =
    status.kind === "failed"
      ? `failed: ${status.error.name}: ${status.error.message}`
      : status.kind === "waiting-for-lock"
        ? "waiting-for-lock: the database is open in another tab"
        : status.kind === "closed"
          ? `closed (${status.reason})`
          : status.kind === "ready" && status.recovered.length > 0
            ? `ready (recovered tasks ${status.recovered.join(", ")})`
            : status.kind;
}

function showError(error: unknown) {
  const { name, message } = error instanceof Error ? error : { name: "Error", message: String(error) };
  const item = document.createElement("li");
  item.dataset.name = name;
  item.textContent = `${name}: ${message}`;
  errorsElement.append(item);
}

function describeTask(record: TaskRecord): string {
  const state = record.state;
  if (state.status !== "terminal" && state.status !== "completing") {
    return `${state.status} ${JSON.stringify(state.checkpoint)}${record.restarts ? ` restarts ${record.restarts}` : ""}`;
  }
  const outcome = state.outcome;
  switch (outcome.status) {
    case "completed":
      return `${state.status} completed: ${JSON.stringify(outcome.result)}`;
    case "failed":
    case "faulted":
      return `${state.status} ${outcome.status}: ${outcome.error.message}${outcome.error.detail === undefined ? "" : ` ${JSON.stringify(outcome.error.detail)}`}`;
    case "aborted":
      return `${state.status} aborted${outcome.reason ? `: ${outcome.reason}` : ""}`;
    case "orphaned":
      return `${state.status} orphaned: ${outcome.reason}`;
  }
}

// The task list comes from the database (live and finished tasks), refreshed after every task commit.
let refreshing: Promise<void> | undefined;
let refreshAgain = false;
function refreshTasks() {
  if (refreshing) {
    refreshAgain = true;
    return;
  }
  const current = client;
  refreshing = (async () => {
    if (current.status.kind !== "ready") return;
    const rows = await current.query("SELECT record FROM tasks ORDER BY id DESC LIMIT 100").catch(() => undefined);
    if (!rows || current !== client) return;
    tasksElement.replaceChildren(
      ...rows.map((row) => {
        const record = JSON.parse(String(row.record)) as TaskRecord;
        const item = document.createElement("li");
        item.dataset.taskId = String(record.id);
        item.dataset.status = record.state.status;
        item.textContent = `#${record.id} ${record.kind}: ${describeTask(record)}`;
        return item;
      }),
    );
  })().finally(() => {
    refreshing = undefined;
    if (refreshAgain) {
      refreshAgain = false;
      refreshTasks();
    }
  });
}

function startWorker(): void {
  const worker = new Worker(new URL("../worker/harness-worker.ts", import.meta.url), { type: "module", name: JSON.stringify({ settings, paused, tab }) });
  const next = connectHarness(worker);
  client = next; // before subscribing: the page shows the new worker's status ("starting") at once
  next.onStatus((status) => {
    if (next !== client) return; // a worker this page replaced
    renderStatus(status);
    if (status.kind === "ready") refreshTasks();
  });
  next
    .onReport((report) => {
      const item = document.createElement("li");
      item.dataset.kind = report.kind;
      item.textContent = JSON.stringify(report);
      reportsElement.append(item);
    })
    .catch(() => {});
  next.watchTasks(() => refreshTasks()).catch(() => {});
}

let client!: HarnessClient;
startWorker();

/** Kills the worker (a crash, as far as the database is concerned) and starts a new one that recovers. */
function restartWorker() {
  client.terminate();
  startWorker();
}

const attempt = (work: () => Promise<unknown>) => () => void work().catch(showError);
document.querySelector("#counter")!.addEventListener("click", attempt(() => client.createTask("example.counter", { to: 5 })));
document.querySelector("#start-task")!.addEventListener(
  "click",
  attempt(async () => {
    const kind = document.querySelector<HTMLInputElement>("#task-kind")!.value.trim();
    const input = JSON.parse(document.querySelector<HTMLInputElement>("#task-input")!.value || "null");
    return client.createTask(kind, input);
  }),
);
document.querySelector("#resume")!.addEventListener("click", attempt(() => client.resume()));
document.querySelector("#takeover")!.addEventListener("click", attempt(() => client.requestTakeover()));
document.querySelector("#close")!.addEventListener("click", attempt(() => client.close()));
document.querySelector("#restart-worker")!.addEventListener("click", restartWorker);
document.querySelector("#clear")!.addEventListener("click", () => {
  localStorage.removeItem(TRANSCRIPT);
  render();
});

render();
// Test and console hooks: the e2e tests drive the same page a person uses. `pi.client` is the current client
// (a new one after "terminate worker").
Object.assign(globalThis, {
  pi: {
    get client() {
      return client;
    },
    transcript,
    restartWorker,
  },
});
document.body.dataset.ready = "";
