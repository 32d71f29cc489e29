import { InvalidSetting } from "./errors.ts";

/** Settings a host may pass in `HarnessOptions.settings`. Every field is optional; defaults are beside it. */
export interface Settings {
  /**
   * S6: a task cut off this many times in a row without progress is not run again. Default 5.
   * `Infinity` disables the limit; anything but a positive integer is rejected at open.
   */
  restartLimit?: number;
  progress?: {
    /** S8/S9: streamed output and partial answers are persisted at most this long after they appear. Default 1000; 0 = every chunk. */
    persistWithinMs?: number;
  };
  /** S9: model request retries. Defaults `{ enabled: true, maxRetries: 3, baseDelayMs: 2000, maxAgentDelayMs: 60000 }`, doubling. */
  retry?: {
    enabled?: boolean;
    maxRetries?: number;
    baseDelayMs?: number;
    maxAgentDelayMs?: number;
  };
  /** How one model turn's tool calls run. Default `"parallel"`. */
  toolExecution?: "parallel" | "sequential";
}

export interface ResolvedSettings {
  restartLimit: number;
  progress: { persistWithinMs: number };
  retry: { enabled: boolean; maxRetries: number; baseDelayMs: number; maxAgentDelayMs: number };
  toolExecution: "parallel" | "sequential";
}

export const DEFAULT_SETTINGS: ResolvedSettings = Object.freeze({
  restartLimit: 5,
  progress: Object.freeze({ persistWithinMs: 1000 }),
  retry: Object.freeze({ enabled: true, maxRetries: 3, baseDelayMs: 2000, maxAgentDelayMs: 60_000 }),
  toolExecution: "parallel",
}) as ResolvedSettings;

/** Fills defaults and rejects bad values with a message that names the setting and what it accepts. */
export function resolveSettings(settings: Settings | undefined): ResolvedSettings {
  const s = settings ?? {};
  if (typeof s !== "object") throw new InvalidSetting(`settings must be an object, got ${typeof s}.`);
  const restartLimit = s.restartLimit ?? DEFAULT_SETTINGS.restartLimit;
  if (restartLimit !== Infinity && !(typeof restartLimit === "number" && Number.isInteger(restartLimit) && restartLimit > 0)) {
    throw new InvalidSetting(
      `settings.restartLimit must be a positive integer or Infinity (no limit); got ${JSON.stringify(restartLimit) ?? String(restartLimit)}.`,
    );
  }
  const persistWithinMs = s.progress?.persistWithinMs ?? DEFAULT_SETTINGS.progress.persistWithinMs;
  nonNegative("settings.progress.persistWithinMs", persistWithinMs);
  const retry = { ...DEFAULT_SETTINGS.retry, ...(s.retry ?? {}) };
  if (typeof retry.enabled !== "boolean") throw new InvalidSetting(`settings.retry.enabled must be a boolean.`);
  if (!Number.isInteger(retry.maxRetries) || retry.maxRetries < 0) {
    throw new InvalidSetting(`settings.retry.maxRetries must be a non-negative integer; got ${String(retry.maxRetries)}.`);
  }
  nonNegative("settings.retry.baseDelayMs", retry.baseDelayMs);
  nonNegative("settings.retry.maxAgentDelayMs", retry.maxAgentDelayMs);
  const toolExecution = s.toolExecution ?? DEFAULT_SETTINGS.toolExecution;
  if (toolExecution !== "parallel" && toolExecution !== "sequential") {
    throw new InvalidSetting(`settings.toolExecution must be "parallel" or "sequential"; got ${JSON.stringify(toolExecution)}.`);
  }
  return { restartLimit, progress: { persistWithinMs }, retry, toolExecution };
}

function nonNegative(name: string, value: unknown): void {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new InvalidSetting(`${name} must be a finite number of milliseconds ≥ 0; got ${JSON.stringify(value) ?? String(value)}.`);
  }
}
