import type { HarnessStatus } from "pi-durable-web/client";
import { app, savedProbeReplay, saveWorkerConfig } from "./src/app.ts";
import { disarmCrashPoint, onCrashPoint, takeAfterReloadNote } from "./src/crashpoints.ts";
import { transcript } from "./src/demos.ts";
import { byId } from "./src/dom.ts";
import "./src/chat.ts";
import "./src/tasks.ts";
import "./src/storage.ts";
import "./src/crash.ts";
import "./src/models.ts";
import "./src/log.ts";
import { checkForUpdate, registerServiceWorker } from "./src/offline.ts";
import { pageMode, runsPhrase } from "./src/place.ts";

// ---- views: a tab bar; on a wide screen the chat stays beside the active panel -------------------------
const wide = window.matchMedia("(min-width: 960px)");
const VIEW_KEY = "pi-durable-web:view";

export function showView(view: string): void {
  // On a wide screen the chat is always shown; "chat" then means the panel beside it keeps its view.
  const effective = view === "chat" && wide.matches ? (document.body.dataset.side ?? "demos") : view;
  if (effective !== "chat") document.body.dataset.side = effective;
  document.body.dataset.view = view;
  for (const tab of document.querySelectorAll<HTMLButtonElement>(".views [role=tab]")) {
    const selected = tab.dataset.view === effective || (tab.dataset.view === "chat" && view === "chat" && !wide.matches);
    tab.setAttribute("aria-selected", String(selected));
    tab.tabIndex = selected ? 0 : -1;
  }
  for (const panel of document.querySelectorAll<HTMLElement>("[data-panel]")) {
    const name = panel.dataset.panel!;
    panel.hidden = !(name === effective || (name === "chat" && (wide.matches || view === "chat")));
  }
  sessionStorage.setItem(VIEW_KEY, view);
}

const tabs = [...document.querySelectorAll<HTMLButtonElement>(".views [role=tab]")];
for (const tab of tabs) {
  tab.addEventListener("click", () => showView(tab.dataset.view!));
  tab.addEventListener("keydown", (event) => {
    const visible = tabs.filter((candidate) => candidate.offsetParent !== null);
    const at = visible.indexOf(tab);
    const next =
      event.key === "ArrowRight"
        ? visible[(at + 1) % visible.length]
        : event.key === "ArrowLeft"
          ? visible[(at - 1 + visible.length) % visible.length]
          : undefined;
    if (!next) return;
    event.preventDefault();
    next.focus();
    next.click();
  });
}
wide.addEventListener("change", () => showView(document.body.dataset.view ?? "chat"));
document.body.dataset.side = "demos";
showView(sessionStorage.getItem(VIEW_KEY) ?? (wide.matches ? "demos" : "chat"));
byId("model-chip").addEventListener("click", () => showView("models"));

// ---- status and banners ------------------------------------------------------------------------------
const statusElement = byId("status");
const takeoverButton = byId<HTMLButtonElement>("takeover");
// `?edge=…` (npm run start:edge): the agent lives in a Durable Object, so a reload of this page is no crash of it.
const tagline = document.querySelector<HTMLElement>(".tagline");
if (tagline && pageMode === "edge")
  tagline.textContent = "An agent in a Durable Object: reload or close this page, the agent goes on there.";
// `?follow=`: the agent runs in this tab under its Durable Object's lease and moves between the two.
if (tagline && pageMode === "follow")
  tagline.textContent = "An agent that follows you: close the tab mid-task, the Durable Object goes on.";
let recoveredNote = takeAfterReloadNote();

function statusText(status: HarnessStatus): string {
  switch (status.kind) {
    case "failed":
      return `failed: ${status.error.name}: ${status.error.message}`;
    case "waiting-for-lock":
      return "waiting-for-lock: the database is open in another tab";
    case "closed":
      return `closed (${status.reason})`;
    case "reconnecting":
      return `reconnecting to the Durable Object (attempt ${status.attempt}, in ${(status.retryInMs / 1000).toFixed(1)} s)`;
    case "ready": {
      // Under a lease (`?follow=`, or an object in follow mode by `?edge=`): where the agent runs now (./src/place.ts).
      const where = runsPhrase(pageMode, status);
      // Work this tab did offline after the object took over: kept as a fork (decision 0039), `client.forks()`.
      const forks = status.forks ? `; ${status.forks} fork${status.forks === 1 ? "" : "s"} of offline work kept (client.forks())` : "";
      const runs = `${where}${forks}`;
      if (status.recovered.length === 0) return `ready${runs}`;
      return `ready (recovered ${status.recovered.length === 1 ? "task" : "tasks"} ${status.recovered.map((id) => `#${id}`).join(", ")})${runs}`;
    }
    default:
      return status.kind;
  }
}

/** Another tab took the database over (`closed takeover`): a later `failed WorkerGone` is this tab's worker ending. */
let takenOver = false;

function renderStatus(status: HarnessStatus): void {
  if (status.kind === "closed") takenOver = status.reason === "takeover";
  else if (status.kind !== "failed") takenOver = false;
  document.body.dataset.status = status.kind;
  document.body.dataset.runs = status.kind === "ready" ? (status.runs ?? "") : "";
  document.body.dataset.forks = status.kind === "ready" ? String(status.forks ?? 0) : "0";
  const text = statusText(status);
  statusElement.textContent = text;
  byId("status-pill").title = text;
  // Every tab is live: a follower reaches the leader tab's worker, and may make itself the leader.
  const role = status.kind === "ready" ? status.role : undefined;
  document.body.dataset.role = role ?? "";
  const roleElement = byId("role");
  roleElement.hidden = role === undefined;
  roleElement.textContent = role ?? "";
  const follower = role === "follower";
  takeoverButton.disabled = !(follower || status.kind === "waiting-for-lock");
  byId("lock-banner").hidden = !(follower || status.kind === "waiting-for-lock");
  byId("lock-banner").classList.toggle("warn", !follower);
  byId("lock-banner").classList.toggle("info", follower);
  byId("lock-banner-text").hidden = follower;
  byId("follower-banner-text").hidden = !follower;

  const failed = byId("failed-banner");
  failed.hidden = status.kind !== "failed";
  if (status.kind === "failed") {
    const settingsProblem = status.error.name === "InvalidSetting";
    byId("failed-banner-text").textContent = settingsProblem
      ? `The worker refused the settings — ${status.error.name}: ${status.error.message} Fix them in Crash → Settings, or reset them.`
      : takenOver && status.error.name === "WorkerGone"
        ? "Another tab took the database over, and this tab's worker has since gone (WorkerGone). Reload to use the database again."
        : `The database could not be opened — ${status.error.name}: ${status.error.message}`;
    byId("banner-reset-settings").hidden = !settingsProblem;
  }

  const closed = byId("closed-banner");
  closed.hidden = status.kind !== "closed";
  if (status.kind === "closed") {
    byId("closed-banner-text").textContent =
      status.reason === "takeover"
        ? "Another tab took the database over; this tab closed it cleanly (no restart counted)."
        : "The database was closed cleanly: the running tasks were parked as pending, with no restart counted.";
  }

  const recovered = byId("recovered-banner");
  if (status.kind === "ready") {
    const parts: string[] = [];
    if (recoveredNote)
      parts.push(
        `The worker was stopped at ${recoveredNote.name} (task #${recoveredNote.taskId}, ${recoveredNote.taskKind}), and the reload was the crash.`,
      );
    if (status.recovered.length > 0)
      parts.push(
        `Recovered: task${status.recovered.length > 1 ? "s" : ""} #${status.recovered.join(", #")} ${status.recovered.length > 1 ? "were" : "was"} running and carr${status.recovered.length > 1 ? "y" : "ies"} on from the last checkpoint (restart counted).`,
      );
    if (recoveredNote?.expect) parts.push(`Expect: ${recoveredNote.expect}`);
    recovered.hidden = parts.length === 0;
    byId("recovered-banner-text").textContent = parts.join(" ");
    recoveredNote = undefined;
  } else if (status.kind !== "opening" && status.kind !== "recovering" && status.kind !== "starting") {
    recovered.hidden = true;
  }
}
app.onStatus(renderStatus);
app.onClient(() => {
  // A worker replaced within this page (terminated or restarted) leaves its stop note for the next ready.
  recoveredNote ??= takeAfterReloadNote();
});

onCrashPoint((state) => {
  const banner = byId("crash-banner");
  banner.hidden = state === undefined;
  byId("banner-disarm").hidden = state?.kind !== "armed";
  if (!state) return;
  byId("crash-banner-text").textContent =
    state.kind === "armed"
      ? `Armed: the worker will stop at ${state.name} the next time it gets there.`
      : `Stopped at ${state.hit.name} (task #${state.hit.taskId}, ${state.hit.taskKind}) — reload to crash here.${state.expect ? ` After the reload: ${state.expect}` : ""}`;
  byId("banner-reload").hidden = state.kind !== "stopped";
  byId("banner-reload-paused").hidden = state.kind !== "stopped";
});

app.onScheduling((scheduling) => {
  byId("paused-banner").hidden = !(app.paused && scheduling === "paused");
});

const reload = (search?: string) => {
  if (search === undefined) location.reload();
  else location.search = search;
};
takeoverButton.addEventListener(
  "click",
  app.attempt(() => app.client.requestTakeover(), "take over"),
);
byId("banner-resume").addEventListener(
  "click",
  app.attempt(() => app.resume(), "resume"),
);
byId("banner-unpause").addEventListener("click", () => reload(""));
byId("banner-reload").addEventListener("click", () => reload());
byId("banner-reload-paused").addEventListener("click", () => reload("?paused"));
byId("banner-reload-failed").addEventListener("click", () => reload());
byId("banner-disarm").addEventListener(
  "click",
  app.attempt(() => disarmCrashPoint(), "disarm"),
);
byId("banner-reopen").addEventListener(
  "click",
  app.attempt(() => app.restartWorkerCleanly(), "reopen"),
);
byId("banner-dismiss").addEventListener("click", () => (byId("recovered-banner").hidden = true));
byId("banner-reset-settings").addEventListener(
  "click",
  app.attempt(async () => {
    saveWorkerConfig({}, savedProbeReplay());
    await app.restartWorkerCleanly();
  }, "reset settings"),
);

// ---- start ---------------------------------------------------------------------------------------------
app.start();
registerServiceWorker();

// Console and test hooks: the e2e tests drive the same page a person uses. `pi.client` is the current client
// (a new one after "terminate the worker").
Object.assign(globalThis, {
  pi: {
    get client() {
      return app.client;
    },
    transcript,
    restartWorker: () => app.restartWorker(),
    showView,
    checkForUpdate,
  },
});
document.body.dataset.ready = "";
