/** The server-call tests' fixtures (test/server-call-copy, server-tools-door, follow-epochs-bound, edge/server-tools). */
import { defineTool } from "../src/agent/tool.ts";
import type { Clock } from "../src/base/clock.ts";
import type { Json } from "../src/base/json.ts";
import type { LeaseBook } from "../src/follow/arbiter.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { SERVER_TOOLS_TOPIC } from "../src/follow/server-call-messages.ts";
import { memoryServerCallStore, type ServerCallStore, ServerCalls } from "../src/follow/server-calls.ts";
import type { Storage, TaskRecord } from "../src/index.ts";
import { ctx } from "./support.ts";

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
 * `call`'s intent as the object's copy holds it (decision 0051): a `pi.tool` task of its conversation, running in the
 * `server` phase with its arguments — as a tab's pushed intent commit leaves it. `state` replaces the task's state.
 */
export function intentTask(call: Omit<AskedCall, "place" | "epoch">, state?: TaskRecord["state"]): TaskRecord {
  return {
    id: call.taskId,
    conversationId: call.conversationId,
    kind: "pi.tool",
    version: 1,
    input: { assistant: 1, callId: call.callId, name: call.tool },
    background: false,
    abortRequested: false,
    state: state ?? { status: "running", checkpoint: { phase: "server", arguments: call.arguments, replay: call.replay } },
  };
}

/** The object's copy holds `call`'s intent (`intentTask`). */
export async function intentInCopy(storage: Storage, call: Omit<AskedCall, "place" | "epoch">, state?: TaskRecord["state"]): Promise<void> {
  await storage.apply({ tasks: [intentTask(call, state)], conversations: [], entries: [], submissions: [], documents: [] });
}

/** `place` holds the lease at `epoch` in `book` (as its `lease.acquire` left it). */
export async function holds(book: LeaseBook, place: string): Promise<number> {
  return (await book.acquire(place, 0)).epoch;
}

/** The object's end over `storage` that only serves its copy: another place holds the lease, it never takes it here. */
export function servingEnd(storage: Storage, book: LeaseBook, clock: Clock): Promise<ObjectEnd> {
  return ObjectEnd.start({
    place: "object",
    storage,
    book,
    clock,
    watchExpiry: false,
    open: () => Promise.reject(new Error("the object does not take the lease here")),
  });
}

/** The server tool `charge` (the server holds the card's key): each run pushes its amount to `runs`. */
export function chargeTool(runs: Json[], replay?: "safe" | "unsafe") {
  return defineTool<{ amount: number }>({
    name: "charge",
    description: "Charge the card on file (the server holds its key)",
    parameters: { type: "object", properties: { amount: { type: "number" } }, required: ["amount"] },
    runsOn: "server",
    ...(replay === undefined ? {} : { replay }),
    async execute({ amount }) {
      runs.push(amount);
      return `charged ${amount}`;
    },
  });
}

/** `end` answers `server-tools.call` with the object's `ServerCalls` for `charge` (decision 0036). */
export function serveCharge(
  end: ObjectEnd,
  book: LeaseBook,
  clock: Clock,
  charge: ReturnType<typeof chargeTool>,
  store: ServerCallStore = memoryServerCallStore(),
): void {
  const calls = new ServerCalls({ lease: book, store, clock, tool: (name) => (name === "charge" ? (charge as never) : undefined) });
  end.serve(SERVER_TOOLS_TOPIC, async (_method, args) => (await calls.call(args[0] as never, ctx)) as unknown as Json);
}
