/**
 * A server tool call is run for the lease holder only if it is a call of the agent's own (decision 0051): the object
 * reads its copy of the holder's log — the one the holder's pushes build — and the request's task must be a `pi.tool`
 * task of the request's conversation, running in its `server` phase, for the request's call id, tool and replay, with
 * the same final arguments. The holder's tab asks only once that intent commit is acknowledged by the object
 * (tool-server.ts), so the copy always has it; a call it does not have was not asked by the agent.
 */

import type { ServerCallRequest } from "../agent/server-port.ts";
import type { ServerCheckpoint } from "../agent/tasks/tool-result.ts";
import { jsonEqual } from "../base/json.ts";
import { ServerCallNotInCopy } from "../errors.ts";
import type { Storage } from "../storage/storage.ts";

/** Resolves when `request` is a call of the copy in `storage`; `ServerCallNotInCopy` otherwise (nothing is read past it). */
export async function checkServerCallInCopy(storage: Pick<Storage, "getTask">, request: ServerCallRequest): Promise<void> {
  const refuse = (why: string) => {
    throw new ServerCallNotInCopy(request.callId, why);
  };
  const task = await storage.getTask(request.taskId);
  if (task?.kind !== "pi.tool" || task.conversationId !== request.conversationId)
    return refuse(`the object's copy has no tool task ${request.taskId} in conversation ${request.conversationId}`);
  const input = task.input as { callId?: unknown; name?: unknown } | null;
  if (input?.callId !== request.callId) return refuse(`task ${request.taskId} is another tool call`);
  if (input.name !== request.tool) return refuse(`task ${request.taskId} calls another tool`);
  const state = task.state;
  const checkpoint = state.status === "running" ? (state.checkpoint as Partial<ServerCheckpoint>) : undefined;
  if (checkpoint?.phase !== "server") return refuse(`task ${request.taskId} is not waiting for the server (it is ${state.status})`);
  if (checkpoint.replay !== request.replay) return refuse(`task ${request.taskId}'s call is ${String(checkpoint.replay)}`);
  if (!jsonEqual(checkpoint.arguments ?? null, request.arguments)) return refuse(`task ${request.taskId}'s call has other arguments`);
}
