import type { Json } from "../src/base/json.ts";
import type { LeaseBook } from "../src/follow/arbiter.ts";
import type { Storage, TaskRecord } from "../src/index.ts";

/** A server tool call as the tab asks it (`ServerCallRequest`). */
export interface AskedCall {
  place: string;
  epoch: number;
  conversationId: number;
  taskId: number;
  callId: string;
  tool: string;
  arguments: { [key: string]: Json };
  replay: "safe" | "unsafe";
}

/**
 * The object's copy holds `call`'s intent (decision 0051): a `pi.tool` task of its conversation, running in the
 * `server` phase with its arguments — as a tab's pushed intent commit leaves it. `state` replaces the task's state.
 */
export async function intentInCopy(storage: Storage, call: Omit<AskedCall, "place" | "epoch">, state?: TaskRecord["state"]): Promise<void> {
  const task: TaskRecord = {
    id: call.taskId,
    conversationId: call.conversationId,
    kind: "pi.tool",
    version: 1,
    input: { assistant: 1, callId: call.callId, name: call.tool },
    background: false,
    abortRequested: false,
    state: state ?? { status: "running", checkpoint: { phase: "server", arguments: call.arguments, replay: call.replay } },
  };
  await storage.apply({ tasks: [task], conversations: [], entries: [], submissions: [], documents: [] });
}

/** `place` holds the lease at `epoch` in `book` (as its `lease.acquire` left it). */
export async function holds(book: LeaseBook, place: string): Promise<number> {
  return (await book.acquire(place, 0)).epoch;
}
