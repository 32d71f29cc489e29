/**
 * The contract between the demo page (web/) and the demo worker (worker/): what the page puts in the
 * worker's name before the database opens, and the app methods the worker adds with
 * `serveHarness({ methods })`, called from the page as `client.call("models.list")` etc.
 */
import type { Settings } from "../src/settings.ts";
import type { EntryRecord } from "../src/storage/records.ts";

/**
 * JSON in the worker's `name`: known before the database opens. The page passes the same config on every
 * load (a reload is the crash, and recovery must see the tools declared as they were: `probeReplay`).
 */
export interface DemoWorkerConfig {
  /** restartLimit, progress.persistWithinMs, retry — validated at open (a bad value fails with InvalidSetting). */
  settings?: Settings;
  /** Open without starting work (look at what a crash left first; `client.resume()` carries on). */
  paused?: boolean;
  /** This tab's id: printed lines carry it, so only this tab records them. */
  tab?: string;
  /** The replay policy the demo's `probe` tool declares (the seed's tool probe). Default "unsafe". */
  probeReplay?: "safe" | "unsafe";
  /** `?follow=`: the Durable Object's follow link (`npm run start:edge`): the tab runs under the object's lease. */
  follow?: string;
}

/** A model the page can pick. The offline one is pi-ai's faux provider driving a scripted agent. */
export interface ModelChoice {
  provider: string;
  id: string;
  label: string;
  offline: boolean;
}

/**
 * A real provider; its key stays in the worker's memory (never in the database, never in the worker's name).
 * A configured provider lives as long as the worker: after a reload the page configures it again. A page
 * that does so for a conversation on that model should open `paused`, configure, then `client.resume()`;
 * a run that resumes before its provider is configured ends `unanswered` (`no_model`).
 *
 * - `openai-compatible`: any Chat Completions endpoint (Ollama, LM Studio, llama.cpp, vLLM…); `baseUrl` is
 *   the part before `/chat/completions`, e.g. `http://127.0.0.1:11434/v1`. The endpoint must allow this
 *   page's origin (CORS). Provider id `"openai-compatible"`; a second configure replaces the first.
 * - `openai` (Responses API) and `anthropic`: pi-ai's built-in providers, provider ids `"openai"` and
 *   `"anthropic"`; a model id pi-ai does not list is used with the provider's default model's limits.
 */
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
  /** A file's text; rejects with `FileNotFound` when there is none. */
  "files.read"(conversationId: number, path: string): string;
}

/**
 * The "ask before writing files" switch: an entry the page writes (`submit({ type: "write", entry })`) each
 * time the person flips it, `data: { on }`. The last one counts; none means off. An entry is durable and in
 * every tab's view, and the tools' approval rule reads the same entries (tools.ts), so the switch and the
 * rule cannot disagree. It is not part of the model's context (no `message`).
 */
export const ASK_BEFORE_WRITING = { kind: "demo.ask-before-writing" } as const;
export interface AskBeforeWritingData {
  on: boolean;
}

/** Whether the "ask before writing files" switch is on after `entries`: the last switch entry says so. */
export function askBeforeWriting(entries: readonly Pick<EntryRecord, "kind" | "payload">[]): boolean {
  const last = entries.findLast((entry) => entry.kind === ASK_BEFORE_WRITING.kind);
  return (last?.payload as { data?: Partial<AskBeforeWritingData> } | null | undefined)?.data?.on === true;
}

/** The offline demo model (pi-ai faux provider). */
export const OFFLINE_MODEL = { provider: "offline", id: "demo-agent" } as const;
/** How the offline model is labelled in `models.list`. */
export const OFFLINE_MODEL_LABEL = "offline demo model";

/**
 * What the offline demo model understands (case does not matter). Anything else gets a short reply that
 * lists these. After a tool round it answers with what the tools returned, and says so when a result is an
 * error or an interruption.
 */
export const OFFLINE_COMMANDS: ReadonlyArray<{ say: string; does: string }> = [
  { say: "note <text>", does: "appends a line to notes.txt (also: remember <text>)" },
  { say: "read notes", does: "reads notes.txt (also: show notes)" },
  { say: "list files", does: "lists this conversation's files (also: ls)" },
  { say: "forget notes", does: "deletes notes.txt (also: clear notes)" },
  { say: "probe", does: "the seed's tool probe: appends hello to notes.txt, then takes 4 s; reload while it runs" },
  { say: "story", does: "a long answer streamed slowly enough to reload in the middle (also: slow)" },
  { say: "ask me", does: "asks you to pick a colour on its card: a page tool, run by one tab (also: choose)" },
];

/**
 * "Ask the person", the demo's page tool (decision 0028): declared in the worker, run by a tab that provides it
 * (web/src/chat/ask-person.ts): its card shows the question and a button per choice; the pick is the result.
 * Its replay is `unsafe` (the default): a reload while it asks ends it interrupted, and the model says so.
 */
export const ASK_PERSON = {
  input: "ask me",
  tool: "ask_person",
  question: "Which colour should the lighthouse shine tonight?",
  choices: ["white", "red", "green"],
} as const;

/**
 * The seed's tool probe. The demo's `probe` tool appends `text` to `path`, reports `output` through
 * `api.output()`, waits `waitMs` (reload now to cut it off), then returns `result`. Its replay policy is
 * `DemoWorkerConfig.probeReplay`. (Notes, "note <text>", use the library's `append`, which does not wait.)
 */
export const PROBE = {
  input: "probe",
  tool: "probe",
  path: "notes.txt",
  text: "hello\n",
  output: "working\n",
  result: "appended",
  waitMs: 4000,
} as const;
