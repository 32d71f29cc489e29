import type { Context } from "../base/context.ts";
import type { Json } from "../base/json.ts";
import type { ExecutionEnv } from "../env/types.ts";
import { InvalidDefinition } from "../errors.ts";
import type { EntryRecord } from "../storage/records.ts";
import type { ImageContent, TextContent } from "./model-types.ts";

/** What a tool may return as content. */
export type ToolContent = (TextContent | ImageContent)[];

/** A tool's own result. Without `content`, the output it streamed through `api.output()` is the content. */
export interface ToolResult {
  content?: string | ToolContent;
  isError?: boolean;
  details?: Json;
}

/** What a tool sees while it runs. */
export interface ToolApi {
  readonly taskId: number;
  readonly conversationId: number;
  readonly callId: string;
  readonly toolName: string;
  /**
   * Streams output: shown live in `pi.live` and persisted at most `settings.progress.persistWithinMs` after
   * it was produced (S8), so a crash loses at most that window.
   */
  output(chunk: string): void;
  /** Replaces the running details (JSON), persisted like output. */
  details(value: Json): void;
  /** The conversation's execution environment (`HarnessOptions.env`). */
  env<E extends ExecutionEnv = ExecutionEnv>(): Promise<E>;
}

/** Where a tool can run (`ToolDefinition.runsOn`). */
export type ToolPlace = "any" | "page" | "server";
const TOOL_PLACES: readonly unknown[] = ["any", "page", "server"] satisfies ToolPlace[];

/**
 * A tool the model can call. `replay` says whether the call may run again after a crash cut it off after it
 * started (S8): `"safe"` only for calls that can run twice without harm (reading, listing); default
 * `"unsafe"`.
 */
export interface ToolDefinition<A = Record<string, unknown>> {
  readonly name: string;
  readonly description: string;
  /** A JSON Schema for the arguments (validated and coerced by pi-ai's `validateToolArguments`). */
  readonly parameters: Record<string, unknown>;
  readonly replay?: "safe" | "unsafe";
  /**
   * Whether a call needs a person's decision before anything of the tool runs: `"never"` (the default),
   * `"always"`, or a rule over the call and its conversation that approves, denies (with a reason) or asks a
   * person (`"user-approval"`). A rule runs off the commit line and may run again after a crash: it must be safe
   * to rerun. A rule that throws denies the call (fails closed).
   */
  readonly approval?: "always" | "never" | ApprovalRule;
  /**
   * How long a call waits for a decision, on the harness clock, before it is denied with reason `"expired"`.
   * Default: no expiry (the call waits for days, through every reload).
   */
  readonly approvalExpiresAfterMs?: number;
  /**
   * Where the tool can run when a conversation follows its user between a tab and its object (decision 0036):
   * - `"any"` (the default): wherever the agent runs now, tab or object.
   * - `"page"`: in a page that provides it (`definePageTool`; DESIGN §4c, decision 0028), not here: a call waits
   *   durably until a page claims it, and its result is what that page sends. `execute` is not called.
   * - `"server"`: only where the server's secrets and resources are (the conversation's Durable Object). A
   *   harness given `serverCalls` sends each call there under its call id, with its lease's epoch, and waits for
   *   the answer (asking again after a crash: the object stores the result and never runs a call id twice); a
   *   harness without `serverCalls` (the object itself, or a single place) runs it here, as any tool.
   */
  readonly runsOn?: ToolPlace;
  execute(args: A, api: ToolApi, context: Context): Promise<ToolResult | string | void> | ToolResult | string | void;
}

// Tools live in extensions of mixed argument types; each tool sees its own.
// biome-ignore lint/suspicious/noExplicitAny: a registry holds tools of every argument type
export type AnyTool = ToolDefinition<any>;

export function defineTool<A = Record<string, unknown>>(tool: ToolDefinition<A>): ToolDefinition<A> {
  if (typeof tool?.name !== "string" || !/^[A-Za-z0-9_-]{1,64}$/.test(tool.name)) {
    throw new InvalidDefinition(`A tool name must be 1-64 letters, digits, "_" or "-"; got ${JSON.stringify(tool?.name)}.`);
  }
  if (typeof tool.parameters !== "object" || tool.parameters === null)
    throw new InvalidDefinition(`Tool ${tool.name} needs a JSON Schema in parameters.`);
  if (typeof tool.execute !== "function") throw new InvalidDefinition(`Tool ${tool.name} needs an execute function.`);
  if (tool.replay !== undefined && tool.replay !== "safe" && tool.replay !== "unsafe") {
    throw new InvalidDefinition(`Tool ${tool.name}: replay must be "safe" or "unsafe"; got ${JSON.stringify(tool.replay)}.`);
  }
  if (tool.approval !== undefined && tool.approval !== "always" && tool.approval !== "never" && typeof tool.approval !== "function") {
    throw new InvalidDefinition(
      `Tool ${tool.name}: approval must be "always", "never" or a rule function; got ${JSON.stringify(tool.approval)}.`,
    );
  }
  const expiry = tool.approvalExpiresAfterMs;
  if (expiry !== undefined && !(typeof expiry === "number" && Number.isFinite(expiry) && expiry > 0)) {
    throw new InvalidDefinition(
      `Tool ${tool.name}: approvalExpiresAfterMs must be a positive number of milliseconds; got ${String(expiry)}.`,
    );
  }
  if (tool.runsOn !== undefined && !TOOL_PLACES.includes(tool.runsOn))
    throw new InvalidDefinition(`Tool ${tool.name}: runsOn must be "any", "page" or "server"; got ${JSON.stringify(tool.runsOn)}.`);
  return Object.freeze({ ...tool });
}

/** A page tool as the worker or object declares it: everything of a tool but its implementation. */
export type PageToolDefinition = Omit<ToolDefinition, "execute" | "runsOn">;

/**
 * Declares a tool that a page implements (DESIGN §4c, decision 0028): its name, schema and replay policy live
 * here, with the other tools; a page provides the implementation (`client.providePageTool`, `usePageTool`).
 * A call commits as waiting for a page and waits durably until a page that provides the tool claims it; one
 * page runs it, its result is committed once. `replay` says what a reload or a closed tab while it runs does:
 * `"unsafe"` (the default) ends the call with an interrupted result, `"safe"` runs it again in the next page.
 */
export function definePageTool(tool: PageToolDefinition): ToolDefinition {
  return defineTool({
    ...tool,
    runsOn: "page",
    execute() {
      throw new InvalidDefinition(`Tool ${tool.name} runs in a page: a page that provides it runs it (providePageTool).`);
    },
  });
}

/** A tool call as hooks see it. */
export interface ToolCallInfo {
  readonly conversationId: number;
  readonly taskId: number;
  readonly callId: string;
  readonly name: string;
  readonly arguments: Record<string, unknown>;
}

/** What an approval rule sees: the call with its final arguments, and its conversation's transcript on demand. */
export interface ApprovalRequest extends ToolCallInfo {
  /** The conversation's committed entries, in id order (read when called). */
  entries(): Promise<EntryRecord[]>;
}

/** A rule's verdict: decide now (with a reason the model sees on a denial), or ask a person. */
export type ApprovalVerdict = "user-approval" | { approved: boolean; reason?: string };

export type ApprovalRule = (call: ApprovalRequest, context: Context) => ApprovalVerdict | Promise<ApprovalVerdict>;

/** The result a tool call ends with, as `afterTool` sees (and may replace) it. */
export interface ToolResultView {
  content: ToolContent;
  isError: boolean;
  details?: Json;
}

export type BeforeToolDecision = { block: string } | { arguments: Record<string, unknown> } | undefined | void;

/**
 * Hooks an extension brings. They run off the commit line and may run again after a crash before the commit
 * that consumes them, so they must be safe to rerun.
 */
export interface AgentHooks {
  /** Before a call runs: block it (`{ block: reason }`) or rewrite its arguments. A throw blocks. */
  beforeTool?(call: ToolCallInfo, context: Context): BeforeToolDecision | Promise<BeforeToolDecision>;
  /** After a call ran: return a replacement result, or nothing to keep it. A throw is reported and skipped. */
  afterTool?(call: ToolCallInfo, result: ToolResultView, context: Context): ToolResultView | void | Promise<ToolResultView | void>;
}
