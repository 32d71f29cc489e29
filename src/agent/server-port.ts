import type { Context } from "../base/context.ts";
import type { Json } from "../base/json.ts";
import type { ToolResultView } from "./tool.ts";

/**
 * A call of a server tool (`runsOn: "server"`, decision 0036) from the place that holds the conversation's lease
 * to the place where the tool runs (its Durable Object).
 */
export interface ServerCallRequest {
  /** Who asks, and the epoch of its lease: the server refuses an epoch that is not the current one (`StaleEpoch`). */
  place: string;
  epoch: number;
  conversationId: number;
  taskId: number;
  /** The tool call's id: the server stores the answer under it and never runs one call id twice. */
  callId: string;
  tool: string;
  /** The final arguments, as the intent committed them. */
  arguments: { [key: string]: Json };
  /** The replay policy the intent committed (S8): with the server's own, whether a run a crash cut off runs again. */
  replay: "safe" | "unsafe";
}

/** What the server answers: the result the call ends with, and how the tool ended there. */
export interface ServerCallAnswer {
  result: ToolResultView;
  /**
   * `returned`: the tool returned; `threw`: it threw (the result is the error, `message` says what); `interrupted`:
   * a crash of the server cut it off and it was not run again (S8: the result says it may have partially run).
   */
  ending: "returned" | "threw" | "interrupted";
  message?: string;
  /** What the tool streamed through `api.output()`, kept beside the result. */
  output?: string;
}

/**
 * The way to the server from a place that does not run server tools itself (`HarnessOptions.serverCalls`): the tab's
 * client of its object, or the object's own store when it holds the lease. `call` resolves with the stored answer
 * however often it is asked; it rejects with `StaleEpoch` or `LeaseNotHeld` when the asking place no longer holds
 * the lease, and with the context's reason when the caller gives up.
 */
export interface ServerCallPort {
  call(request: ServerCallRequest, context: Context): Promise<ServerCallAnswer>;
}

/** What the agent's tool task gets of `serverCalls` through the kernel (`AgentLayer.serverCalls`). */
export interface ServerCalling {
  readonly port: ServerCallPort;
  /** The lease the harness writes under (its place and epoch), or undefined: no lease, server tools run here. */
  lease(): { place: string; epoch: number } | undefined;
  /** The server refused this place's epoch: it lost the lease, and stops as after any lost lease. */
  lose(reason: Error): void;
}

/** `serverCalls` as the tool task sees it, over the session's lease (`fence`: absent without a lease, or once lost). */
export function serverCalling(
  session: { readonly fence: { readonly place: string; readonly epoch: number } | undefined; loseFence(reason: Error): void },
  port: ServerCallPort | undefined,
): ServerCalling | undefined {
  if (!port) return undefined;
  return {
    port,
    lease: () => {
      const fence = session.fence;
      return fence && { place: fence.place, epoch: fence.epoch };
    },
    lose: (reason) => session.loseFence(reason),
  };
}
