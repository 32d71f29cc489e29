import type { DemoWorkerConfig } from "./protocol.ts";

/**
 * This worker's DemoWorkerConfig, from its name (the page sets it before the database opens); a worker
 * started without one, or with a name that is not the config, gets the defaults.
 */
export function workerConfig(): DemoWorkerConfig {
  try {
    // The page spells Infinity (no limit) as "Infinity": JSON has no Infinity.
    const parsed: unknown = JSON.parse((globalThis as { name?: string }).name || "{}", (_key, value) =>
      value === "Infinity" ? Infinity : value,
    );
    return parsed && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as DemoWorkerConfig) : {};
  } catch {
    return {};
  }
}
