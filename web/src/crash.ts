import type { Settings } from "pi-durable-web";
import { app, saveWorkerConfig, savedProbeReplay, savedSettings, type ProbeReplay } from "./app.ts";
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
byId("close").addEventListener("click", app.attempt(() => app.client.close(), "close"));
byId("resume").addEventListener("click", app.attempt(() => app.resume(), "resume"));
byId("reload-paused").addEventListener("click", () => {
  location.search = "?paused";
});

const crashSelect = byId<HTMLSelectElement>("crash-point");
const crashStatus = byId("crash-point-status");
byId<HTMLFormElement>("crash-form").addEventListener("submit", (event) => {
  event.preventDefault();
  app.attempt(() => {
    void armCrashPoint(crashSelect.value);
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
