/**
 * The server's half of server tools (`runsOn: "server"`, decision 0036): the place that holds the tools' secrets
 * (the conversation's Durable Object) runs the calls a lease holder sends it, each at most once per call id, and
 * keeps the answer under that id so that every later ask — after a lost link, a crash of the asking tab, a hand-over
 * to this very object — gets the stored answer instead of a second run. Platform-neutral: the store is an interface
 * (a table in the object's SQLite, memory in tests) and the epoch is checked against the object's `LeaseBook`.
 */
import type { Tool } from "@earendil-works/pi-ai";
import { validateToolArguments } from "@earendil-works/pi-ai/utils/validation";
import type { ToolCall } from "../agent/model-types.ts";
import type { ServerCallAnswer, ServerCallPort, ServerCallRequest } from "../agent/server-port.ts";
import { errorResult, normalize, textContent } from "../agent/tasks/tool-result.ts";
import type { AnyTool, ToolApi, ToolResultView } from "../agent/tool.ts";
import type { Clock } from "../base/clock.ts";
import { BACKGROUND_CONTEXT, type Context, waitFor } from "../base/context.ts";
import { errorMessage } from "../base/error-message.ts";
import { cloneJson, type Json, jsonEqual } from "../base/json.ts";
import type { ExecutionEnv } from "../env/types.ts";
import { InvalidArguments, LeaseNotHeld, StaleEpoch } from "../errors.ts";
import { checkJson, DEFAULT_MAX_BYTES_ROW_LIMITED, DEFAULT_MAX_DEPTH } from "../limits.ts";
import type { LeaseRecord } from "./arbiter.ts";
import { serverCallRequest } from "./server-call-messages.ts";

/** One call as the server keeps it: what was asked, and once it ran, its answer. */
export interface StoredServerCall {
  conversationId: number;
  callId: string;
  taskId: number;
  tool: string;
  arguments: { [key: string]: Json };
  /** The epoch it was first asked under. */
  epoch: number;
  /** On the server's clock: when it started. */
  at: number;
  /** Absent while it runs (or when a crash of the server cut it off); then the call's one answer. */
  answer?: ServerCallAnswer;
}

/**
 * Where the server keeps its calls. Both methods are synchronous (the object's `ctx.storage.sql` is), so that looking
 * a call up and marking it started happen with nothing in between: two asks of one call id can never both run it.
 */
export interface ServerCallStore {
  get(conversationId: number, callId: string): StoredServerCall | undefined;
  put(call: StoredServerCall): void;
}

/** A store in memory (tests; a process that is both places). */
export function memoryServerCallStore(): ServerCallStore & { readonly calls: ReadonlyMap<string, StoredServerCall> } {
  const calls = new Map<string, StoredServerCall>();
  const key = (conversationId: number, callId: string) => `${conversationId}:${callId}`;
  return {
    calls,
    get: (conversationId, callId) => {
      const found = calls.get(key(conversationId, callId));
      return found && cloneJson(found);
    },
    put: (call) => void calls.set(key(call.conversationId, call.callId), cloneJson(call)),
  };
}

export interface ServerCallsOptions {
  /** The object's lease record (`LeaseBook.record`): a call is run only for the place that holds the current epoch. */
  lease: { readonly record: LeaseRecord };
  store: ServerCallStore;
  clock: Pick<Clock, "now">;
  /** The server's own tools by name (its registry's): only those declared `runsOn: "server"` are run for a caller. */
  tool(name: string): AnyTool | undefined;
  /** The conversation's execution environment on the server (`HarnessOptions.env` of the object). */
  env?(conversationId: number, context: Context): ExecutionEnv | Promise<ExecutionEnv>;
}

/** How large an answer may be: it crosses the link and becomes a row at the asking place. */
const ANSWER_LIMITS = { maxDepth: DEFAULT_MAX_DEPTH, maxBytes: DEFAULT_MAX_BYTES_ROW_LIMITED };

/**
 * The server's calls: `call` checks the request (its shape, and that the asking place holds the current epoch),
 * answers from the store when the call id was answered, joins the run when it is running in this process, and
 * otherwise runs the tool — once: a call that a crash of the server cut off runs again only when both the asked and
 * the server's replay are `"safe"` (S8); otherwise its answer is the interruption.
 */
export class ServerCalls implements ServerCallPort {
  readonly #options: ServerCallsOptions;
  readonly #running = new Map<string, Promise<ServerCallAnswer>>();

  constructor(options: ServerCallsOptions) {
    this.#options = options;
  }

  call(request: ServerCallRequest, context: Context): Promise<ServerCallAnswer> {
    try {
      return waitFor(this.#answer(request), context);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Looks up, joins or starts the call, with nothing awaited before the store knows it started. */
  #answer(request: ServerCallRequest): Promise<ServerCallAnswer> {
    const problem = serverCallRequest(request, "the call");
    if (problem) throw new InvalidArguments("serverCall", problem);
    this.#admit(request);
    const { store } = this.#options;
    const key = `${request.conversationId}:${request.callId}`;
    const stored = store.get(request.conversationId, request.callId);
    if (stored && !sameCall(stored, request)) {
      throw new InvalidArguments(
        "serverCall",
        `call id ${JSON.stringify(request.callId)} of conversation ${request.conversationId} was asked for another call (task ${stored.taskId}, tool ${stored.tool})`,
      );
    }
    if (stored?.answer) return Promise.resolve(stored.answer);
    const running = this.#running.get(key);
    if (running) return running;
    const call: StoredServerCall = stored ?? {
      conversationId: request.conversationId,
      callId: request.callId,
      taskId: request.taskId,
      tool: request.tool,
      arguments: cloneJson(request.arguments),
      epoch: request.epoch,
      at: this.#options.clock.now(),
    };
    const tool = this.#options.tool(request.tool);
    // Started before, by a process that is gone (no run is in this one): it may have partially run.
    const cutOff = stored !== undefined && !(request.replay === "safe" && tool?.replay === "safe");
    if (!stored) store.put(call);
    const run = (cutOff ? Promise.resolve(interrupted(request.tool)) : this.#run(call, tool)).then((answer) => {
      store.put({ ...call, answer });
      return answer;
    });
    const settled = run.finally(() => this.#running.delete(key));
    this.#running.set(key, settled);
    return settled;
  }

  #admit(request: ServerCallRequest): void {
    admitServerCall(this.#options.lease.record, this.#options.clock.now(), request);
  }

  async #run(call: StoredServerCall, tool: AnyTool | undefined): Promise<ServerCallAnswer> {
    if (tool?.runsOn !== "server") {
      const message = `Tool ${call.tool} is not a server tool of this server`;
      return { result: errorResult([], message), ending: "threw", message };
    }
    let args: Record<string, unknown>;
    try {
      const toolCall: ToolCall = { type: "toolCall", id: call.callId, name: call.tool, arguments: cloneJson(call.arguments) };
      args = validateToolArguments(tool as unknown as Tool, toolCall) as Record<string, unknown>;
    } catch (error) {
      const message = `Tool ${call.tool}'s arguments were refused by the server: ${errorMessage(error)}`;
      return { result: errorResult([], message), ending: "threw", message };
    }
    let output = "";
    let details: Json | undefined;
    const context = BACKGROUND_CONTEXT; // the run is the server's: an asker that gives up does not cut it off
    const api: ToolApi = {
      taskId: call.taskId,
      conversationId: call.conversationId,
      callId: call.callId,
      toolName: call.tool,
      output: (chunk) => {
        output += String(chunk);
      },
      details: (value) => {
        details = cloneJson(value);
      },
      env: async <E extends ExecutionEnv>() => {
        if (!this.#options.env) throw new TypeError(`The server of tool ${call.tool} has no execution environment (env).`);
        return (await this.#options.env(call.conversationId, context)) as E;
      },
    };
    let answer: ServerCallAnswer;
    try {
      const result = normalize(await tool.execute(args, api, context), output, details);
      answer = { result, ending: "returned", ...(output ? { output } : {}) };
    } catch (error) {
      const message = `Tool ${call.tool} threw: ${errorMessage(error)}`;
      answer = {
        result: errorResult(textContent(output), errorMessage(error), details),
        ending: "threw",
        message,
        ...(output ? { output } : {}),
      };
    }
    return bounded(call.tool, answer);
  }
}

/** Only the holder of the current epoch may have a call run (a superseded one is `StaleEpoch`, another `LeaseNotHeld`). */
export function admitServerCall(record: LeaseRecord, now: number, request: Pick<ServerCallRequest, "epoch" | "place">): void {
  if (request.epoch < record.epoch) throw new StaleEpoch(request.epoch, record.epoch, "the server of its server tools");
  if (request.epoch > record.epoch) throw new LeaseNotHeld(request.place, `epoch ${request.epoch} was never granted`);
  if (record.holder !== request.place || now >= (record.expiresAt ?? Infinity))
    throw new LeaseNotHeld(request.place, `its lease of epoch ${request.epoch} is not held (holder: ${record.holder ?? "none"})`);
}

function sameCall(stored: StoredServerCall, request: ServerCallRequest): boolean {
  return stored.taskId === request.taskId && stored.tool === request.tool && jsonEqual(stored.arguments, request.arguments);
}

/** S8 on the server: a run a crash cut off is not run again unless it is safe; the model reads that it may have run. */
function interrupted(tool: string): ServerCallAnswer {
  const message = `Tool ${tool} was interrupted and may have partially run`;
  return { result: errorResult([], message), ending: "interrupted", message };
}

/** An answer within the limits of the link and of the row it becomes; past them, an error result that says so. */
function bounded(tool: string, answer: ServerCallAnswer): ServerCallAnswer {
  try {
    checkJson(answer, ANSWER_LIMITS, `The result of server tool ${tool}`);
    return answer;
  } catch (error) {
    const message = errorMessage(error);
    const result: ToolResultView = errorResult([], message);
    return { result, ending: "threw", message };
  }
}
