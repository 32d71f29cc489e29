/**
 * The contract between the demo page (web/) and the demo worker (worker/): what the page puts in the
 * worker's name before the database opens, and the app methods the worker adds with
 * `serveHarness({ methods })`, called from the page as `client.call("models.list")` etc.
 */
import type { Settings } from "../src/settings.ts";

/** JSON in the worker's `name`: known before the database opens. */
export interface DemoWorkerConfig {
  /** restartLimit, progress.persistWithinMs, retry — validated at open (a bad value fails with InvalidSetting). */
  settings?: Settings;
  /** Open without starting work (look at what a crash left first; `client.resume()` carries on). */
  paused?: boolean;
  /** This tab's id: printed lines carry it, so only this tab records them. */
  tab?: string;
  /** The replay policy the demo's `append` tool declares (the seed's tool probe). Default "unsafe". */
  probeReplay?: "safe" | "unsafe";
}

/** A model the page can pick. The offline one is pi-ai's faux provider driving a scripted agent. */
export interface ModelChoice {
  provider: string;
  id: string;
  label: string;
  offline: boolean;
}

/** A real provider; its key stays in the worker's memory (never in the database). */
export type ProviderConfig =
  | { kind: "openai-compatible"; baseUrl: string; apiKey?: string; model: string }
  | { kind: "openai"; apiKey: string; model: string }
  | { kind: "anthropic"; apiKey: string; model: string };

/** `client.call(name, ...args)` methods of the demo worker. */
export interface DemoMethods {
  "models.list"(): ModelChoice[];
  /** Adds (or replaces) a provider; returns the choices now available. */
  "models.configure"(provider: ProviderConfig): ModelChoice[];
  /** Files of a conversation's OPFS environment. */
  "files.list"(conversationId: number): string[];
  "files.read"(conversationId: number, path: string): string;
}

/** The offline demo model (pi-ai faux provider). */
export const OFFLINE_MODEL = { provider: "offline", id: "demo-agent" } as const;
