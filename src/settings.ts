import { InvalidSetting } from "./errors.ts";
import { DEFAULT_MAX_BYTES, DEFAULT_MAX_BYTES_ROW_LIMITED, DEFAULT_MAX_DEPTH, type JsonLimits, MAX_DEPTH_LIMIT } from "./limits.ts";

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
  /**
   * S4: how long `close()` waits (harness clock) for a phase that ignores its abort signal. Default 10000;
   * `Infinity` waits for ever. After it, close gives up on that phase: its task stays `running` in storage
   * (the next open counts a restart, as after a crash) and the phase's later commits are refused.
   */
  closeTimeoutMs?: number;
  /**
   * How large a JSON value may be where it enters the harness: a task input (also a child task's), a
   * submission's content, a tool's arguments and result, a checkpoint, memo, outcome, document or entry
   * written through a `Tx`, an app method's arguments at the host. Checked before anything commits; past a
   * limit the call is refused with `InvalidInput` naming it, and nothing is written.
   */
  limits?: {
    /** Levels of nesting (`[[1]]` is 2). Default 64; at most 512 (a stored row must stay within SQLite's JSON depth of 1000). */
    maxDepth?: number;
    /**
     * Bytes of one value serialized as JSON (UTF-8). Default 1 MiB (1,048,576) on storage whose rows are
     * limited (a Durable Object row holds at most 2 MB, and a task's input and checkpoint share one), 8 MiB
     * (8,388,608) elsewhere (sqlite-wasm on OPFS or in memory, MemoryStorage).
     */
    maxBytes?: number;
  };
}

export interface ResolvedSettings {
  restartLimit: number;
  progress: { persistWithinMs: number };
  retry: { enabled: boolean; maxRetries: number; baseDelayMs: number; maxAgentDelayMs: number };
  toolExecution: "parallel" | "sequential";
  closeTimeoutMs: number;
  limits: JsonLimits;
}

export const DEFAULT_SETTINGS: ResolvedSettings = Object.freeze({
  restartLimit: 5,
  progress: Object.freeze({ persistWithinMs: 1000 }),
  retry: Object.freeze({ enabled: true, maxRetries: 3, baseDelayMs: 2000, maxAgentDelayMs: 60_000 }),
  toolExecution: "parallel",
  closeTimeoutMs: 10_000,
  limits: Object.freeze({ maxDepth: DEFAULT_MAX_DEPTH, maxBytes: DEFAULT_MAX_BYTES }),
}) as ResolvedSettings;

/**
 * Fills defaults and rejects bad values with a message that names the setting and what it accepts.
 * `storage.maxRowBytes` (a backend whose rows are limited) lowers the default of `limits.maxBytes`.
 */
export function resolveSettings(settings: Settings | undefined, storage?: { maxRowBytes?: number | undefined }): ResolvedSettings {
  const s = section("settings", settings, DEFAULT_SETTINGS) as Settings;
  const restartLimit = s.restartLimit ?? DEFAULT_SETTINGS.restartLimit;
  if (restartLimit !== Infinity && !(typeof restartLimit === "number" && Number.isInteger(restartLimit) && restartLimit > 0)) {
    throw new InvalidSetting(`settings.restartLimit must be a positive integer or Infinity (no limit); got ${show(restartLimit)}.`);
  }
  const progress = section("settings.progress", s.progress, DEFAULT_SETTINGS.progress) as NonNullable<Settings["progress"]>;
  const persistWithinMs = progress.persistWithinMs ?? DEFAULT_SETTINGS.progress.persistWithinMs;
  nonNegative("settings.progress.persistWithinMs", persistWithinMs);
  const retry = { ...DEFAULT_SETTINGS.retry, ...(section("settings.retry", s.retry, DEFAULT_SETTINGS.retry) as Settings["retry"]) };
  if (typeof retry.enabled !== "boolean") throw new InvalidSetting(`settings.retry.enabled must be a boolean; got ${show(retry.enabled)}.`);
  if (!Number.isInteger(retry.maxRetries) || retry.maxRetries < 0) {
    throw new InvalidSetting(`settings.retry.maxRetries must be a non-negative integer; got ${show(retry.maxRetries)}.`);
  }
  nonNegative("settings.retry.baseDelayMs", retry.baseDelayMs);
  nonNegative("settings.retry.maxAgentDelayMs", retry.maxAgentDelayMs);
  const toolExecution = s.toolExecution ?? DEFAULT_SETTINGS.toolExecution;
  if (toolExecution !== "parallel" && toolExecution !== "sequential") {
    throw new InvalidSetting(`settings.toolExecution must be "parallel" or "sequential"; got ${show(toolExecution)}.`);
  }
  const closeTimeoutMs = s.closeTimeoutMs ?? DEFAULT_SETTINGS.closeTimeoutMs;
  if (closeTimeoutMs !== Infinity) nonNegative("settings.closeTimeoutMs", closeTimeoutMs);
  const limits = section("settings.limits", s.limits, DEFAULT_SETTINGS.limits) as NonNullable<Settings["limits"]>;
  const maxDepth = limits.maxDepth ?? DEFAULT_MAX_DEPTH;
  if (!(Number.isInteger(maxDepth) && maxDepth >= 1 && maxDepth <= MAX_DEPTH_LIMIT)) {
    throw new InvalidSetting(`settings.limits.maxDepth must be an integer from 1 to ${MAX_DEPTH_LIMIT}; got ${show(maxDepth)}.`);
  }
  const rowLimited = storage?.maxRowBytes !== undefined;
  const maxBytes = limits.maxBytes ?? (rowLimited ? DEFAULT_MAX_BYTES_ROW_LIMITED : DEFAULT_MAX_BYTES);
  if (!(Number.isSafeInteger(maxBytes) && maxBytes >= 16)) {
    throw new InvalidSetting(`settings.limits.maxBytes must be an integer number of bytes ≥ 16; got ${show(maxBytes)}.`);
  }
  if (rowLimited && maxBytes > (storage?.maxRowBytes as number)) {
    throw new InvalidSetting(
      `settings.limits.maxBytes is ${maxBytes}, but a row of this storage holds at most ${storage?.maxRowBytes} bytes; lower it.`,
    );
  }
  return { restartLimit, progress: { persistWithinMs }, retry, toolExecution, closeTimeoutMs, limits: { maxDepth, maxBytes } };
}

/** An optional plain object whose keys are all known (a misspelled key is a mistake, not a no-op). */
function section(name: string, value: unknown, known: object): object {
  if (value === undefined) return {};
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new InvalidSetting(`${name} must be an object; got ${show(value)}.`);
  }
  const unknown = Object.keys(value).filter((key) => !Object.hasOwn(known, key));
  if (unknown.length > 0) {
    throw new InvalidSetting(
      `${name} has unknown key${unknown.length > 1 ? "s" : ""} ${unknown.map((k) => JSON.stringify(k)).join(", ")}; known: ${Object.keys(known).join(", ")}.`,
    );
  }
  return value;
}

function nonNegative(name: string, value: unknown): void {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new InvalidSetting(`${name} must be a finite number of milliseconds ≥ 0; got ${show(value)}.`);
  }
}

/** A value as a message shows it: NaN and Infinity by name (JSON would say null), strings quoted. */
function show(value: unknown): string {
  if (typeof value === "number" || typeof value === "bigint") return String(value);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
