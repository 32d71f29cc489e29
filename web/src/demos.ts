import type { Json } from "pi-durable-web";
import { app, type ProbeReplay, savedSettings, saveWorkerConfig, whenReady } from "./app.ts";
import { ensureModel, whenConversation } from "./conversation.ts";
import { armCrashPoint } from "./crashpoints.ts";
import { byId, h } from "./dom.ts";
import { onFinishedTasks } from "./tasks.ts";

/**
 * The seed's scenarios as one-click demos, the lines the demo tasks print, and a form to start any task.
 * Printed lines come from the worker over a broadcast channel; this tab keeps them (localStorage) across
 * reloads, so a line printed twice would show twice.
 */
const TRANSCRIPT = "pi-durable-web:transcript";
export const transcript = (): string[] => JSON.parse(localStorage.getItem(TRANSCRIPT) ?? "[]");

const transcriptElement = byId("transcript");
function renderTranscript(): void {
  transcriptElement.textContent = transcript().join("\n");
  transcriptElement.classList.toggle("is-empty", transcript().length === 0);
}

// Every tab hears the print broadcast; only the tab whose worker printed a line records it, so a second tab
// (waiting for the database) does not write the transcript twice.
new BroadcastChannel("pi-durable-web:print").onmessage = (event) => {
  if (event.data.tab !== app.tab) return;
  localStorage.setItem(TRANSCRIPT, JSON.stringify([...transcript(), String(event.data.line)]));
  renderTranscript();
};
window.addEventListener("storage", (event) => {
  if (event.key === TRANSCRIPT || event.key === null) renderTranscript();
});
byId("clear").addEventListener("click", () => {
  localStorage.removeItem(TRANSCRIPT);
  renderTranscript();
});
renderTranscript();

// What the demo's own tasks returned (the agent's pi.* tasks are in the Tasks panel), from the database.
const results = byId<HTMLUListElement>("results");
onFinishedTasks((finished) => {
  const shown = finished.filter((record) => !record.kind.startsWith("pi.")).slice(0, 5);
  results.replaceChildren(
    ...shown.map((record) => {
      const outcome = record.state.status === "terminal" ? record.state.outcome : undefined;
      const text = outcome?.status === "completed" ? JSON.stringify(outcome.result) : (outcome?.status ?? record.state.status);
      return h(
        "li",
        { "data-task-id": String(record.id), "data-kind": record.kind },
        h("code", null, `#${record.id} ${record.kind}`),
        ` → ${text}`,
      );
    }),
  );
  results.classList.toggle("is-empty", shown.length === 0);
});

// ---- the demos -----------------------------------------------------------------------------------------
const demoState = byId("demo-state");
function say(text: string): void {
  demoState.hidden = false;
  demoState.textContent = text;
}

const EXPECT = {
  counter: "it goes on with tick 3, tick 4, tick 5 and “counted to 5”; tick 2 is not printed again.",
  unsafe:
    "the probe tool is not run again: its result is the saved “working” output and “Tool probe was interrupted and may have partially run”, and the agent answers after it.",
  safe: "the probe tool runs again (stored and current replay are both safe): notes.txt gets “hello” twice and the result is “appended”.",
};

async function counterDemo(): Promise<void> {
  const client = await whenReady();
  void armCrashPoint("counter:after-tick-2", EXPECT.counter);
  await client.createTask("example.counter", { to: 5 });
  await app.resume(); // a page opened ?paused starts the work it asked for
  say("Example 12 is counting; the worker stops right after tick 2. Reload when the banner says so.");
}

async function probeDemo(replay: ProbeReplay): Promise<void> {
  if (app.config.probeReplay !== replay) {
    // The tool's replay is declared in the worker: save it and start a worker that declares it.
    saveWorkerConfig(savedSettings(), replay);
    say(`Restarting the worker with the probe tool's replay set to ${replay}…`);
    await app.restartWorkerCleanly();
  }
  const { client, id, view } = await whenConversation();
  await ensureModel(client, id, view);
  void armCrashPoint("tool:output-persisted", replay === "safe" ? EXPECT.safe : EXPECT.unsafe);
  await client.submit(id, { type: "input", content: "probe" });
  say(
    `The agent calls the probe tool (replay ${replay}); the worker stops once its “working” output is on disk. Watch the chat, then reload.`,
  );
}

byId("demo-counter").addEventListener("click", app.attempt(counterDemo, "Example 12 demo"));
byId("demo-probe-unsafe").addEventListener(
  "click",
  app.attempt(() => probeDemo("unsafe"), "tool probe demo"),
);
byId("demo-probe-safe").addEventListener(
  "click",
  app.attempt(() => probeDemo("safe"), "tool probe demo"),
);
byId("counter").addEventListener(
  "click",
  app.attempt(() => app.client.createTask("example.counter", { to: 5 }), "start Example 12"),
);

byId<HTMLFormElement>("task-form").addEventListener("submit", (event) => {
  event.preventDefault();
  app.attempt(async () => {
    const kind = byId<HTMLInputElement>("task-kind").value.trim();
    const input = JSON.parse(byId<HTMLInputElement>("task-input").value || "null") as Json;
    return app.client.createTask(kind, input);
  }, "start task")();
});
