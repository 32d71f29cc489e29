import type { Settings } from "pi-durable-web";
import { app, type ProbeReplay, savedProbeReplay, savedSettings, saveWorkerConfig } from "./app.ts";
import { armCrashPoint, onCrashPoint } from "./crashpoints.ts";
import { byId } from "./dom.ts";

/**
 * Crash controls (reload, terminate the worker, clean close, open paused, resume), a named crash point to
 * stop at, and the harness settings. Settings travel in the worker's name, so they apply to a new worker:
 * "save" stores them and restarts the worker cleanly. The worker checks them at open; a bad value shows as
 * an InvalidSetting failure in the banner.
 */
byId("reload").addEventListener("click", () => location.reload());
byId("restart-worker").addEventListener("click", () => app.restartWorker());
byId("close").addEventListener(
  "click",
  app.attempt(() => app.client.close(), "close"),
);
byId("resume").addEventListener(
  "click",
  app.attempt(() => app.resume(), "resume"),
);
byId("reload-paused").addEventListener("click", () => {
  location.search = "?paused";
});

/** What the reload after each stop will show: said in the banner, so nothing is lost without a word. */
export const CRASH_POINT_EXPECT: Record<string, string> = {
  "counter:after-tick-2": "Example 12 goes on with tick 3; tick 2 is not printed again.",
  "memo:after-write":
    "the memo was committed, the side effect after it was not: the rerun reads the memo and skips it. In Example 12 that line (say tick 1) is never printed — at most once, as the seed asks: a memo written before a print means a crash in between loses the print, never doubles it.",
  "task:after-commit": "the task carries on from the state it just committed; nothing before it runs again.",
  "tool:after-intent":
    "the tool's intent is stored but it never ran: an unsafe tool is not run now either, and its result says it was interrupted.",
  "tool:output-persisted":
    "the tool's saved output comes back in its result; an unsafe tool is not run again (interrupted), a safe one is.",
  "generation:streaming": "the part of the answer already on disk is kept as an aborted answer, and the model request is retried.",
};

const crashSelect = byId<HTMLSelectElement>("crash-point");
const crashStatus = byId("crash-point-status");
byId<HTMLFormElement>("crash-form").addEventListener("submit", (event) => {
  event.preventDefault();
  app.attempt(() => {
    void armCrashPoint(crashSelect.value, CRASH_POINT_EXPECT[crashSelect.value]);
  }, "arm crash point")();
});
onCrashPoint((state) => {
  crashStatus.textContent = !state
    ? ""
    : state.kind === "armed"
      ? `Armed: the worker stops at ${state.name} the next time it gets there.`
      : `stopped at ${state.hit.name} — reload to crash here`;
  crashStatus.dataset.state = state?.kind ?? "";
});

// ---- settings ------------------------------------------------------------------------------------------
const fields = {
  restartLimit: byId<HTMLInputElement>("setting-restart-limit"),
  persistWithinMs: byId<HTMLInputElement>("setting-persist"),
  maxRetries: byId<HTMLInputElement>("setting-max-retries"),
  baseDelayMs: byId<HTMLInputElement>("setting-base-delay"),
};

function fill(settings: Settings, replay: ProbeReplay): void {
  const text = (value: number | undefined) => (value === undefined ? "" : String(value));
  fields.restartLimit.value = text(settings.restartLimit);
  fields.persistWithinMs.value = text(settings.progress?.persistWithinMs);
  fields.maxRetries.value = text(settings.retry?.maxRetries);
  fields.baseDelayMs.value = text(settings.retry?.baseDelayMs);
  byId<HTMLInputElement>(replay === "safe" ? "replay-safe" : "replay-unsafe").checked = true;
}

/** What the form says; a field that is not a number goes through as written, so the worker names the problem. */
function read(): Settings {
  const value = (input: HTMLInputElement): number | string | undefined => {
    const text = input.value.trim();
    if (text === "") return undefined;
    const number = Number(text);
    return Number.isNaN(number) ? text : number;
  };
  const settings: Record<string, unknown> = {};
  const restartLimit = value(fields.restartLimit);
  if (restartLimit !== undefined) settings.restartLimit = restartLimit;
  const persistWithinMs = value(fields.persistWithinMs);
  if (persistWithinMs !== undefined) settings.progress = { persistWithinMs };
  const maxRetries = value(fields.maxRetries);
  const baseDelayMs = value(fields.baseDelayMs);
  if (maxRetries !== undefined || baseDelayMs !== undefined) {
    settings.retry = { ...(maxRetries !== undefined ? { maxRetries } : {}), ...(baseDelayMs !== undefined ? { baseDelayMs } : {}) };
  }
  return settings as Settings;
}

fill(savedSettings(), savedProbeReplay());
app.onClient(() => fill(savedSettings(), savedProbeReplay()));

byId<HTMLFormElement>("settings-form").addEventListener("submit", (event) => {
  event.preventDefault();
  app.attempt(async () => {
    const replay: ProbeReplay = byId<HTMLInputElement>("replay-safe").checked ? "safe" : "unsafe";
    saveWorkerConfig(read(), replay);
    await app.restartWorkerCleanly();
  }, "apply settings")();
});
byId("reset-settings").addEventListener("click", () => fill({}, "unsafe"));
