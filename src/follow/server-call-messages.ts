/**
 * What server tools' calls look like on the link between a lease holder and its server (decision 0036), and the
 * checks every message gets where it arrives: the link is a stranger's until checked (size, depth, shape).
 */
import { contentItem } from "../agent/conversation/drafts.ts";
import type { ServerCallAnswer, ServerCallRequest } from "../agent/server-port.ts";
import type { SerializedError } from "../host/error-wire.ts";
import { type Check, flag, id, integer, json, list, literal, record, text, variant } from "../shape.ts";

export type ServerCallMessage =
  /** The holder asks its server for a call's answer (again and again until it has it). */
  | { type: "server-call"; request: ServerCallRequest }
  /** The server's answer to a call, the same for every ask of it (`epoch`: the ask's). */
  | { type: "server-answer"; conversationId: number; callId: string; epoch: number; answer: ServerCallAnswer }
  /**
   * The server refused the ask under `epoch` (superseded, malformed): the error, as the error wire carries it. Only
   * an ask under that epoch is refused by it (a late refusal of a dead incarnation's ask must not fail its successor's).
   */
  | { type: "server-refused"; conversationId: number; callId: string; epoch: number; error: SerializedError };

const callId = text({ max: 200 });
const toolName = text({ max: 64 });
const epoch = integer(1, Number.MAX_SAFE_INTEGER);
const replay = literal("safe", "unsafe");
const objectOf: Check = (value, path) =>
  json(value, path) ??
  (typeof value === "object" && value !== null && !Array.isArray(value) ? undefined : `${path} must be an object of arguments`);

/** A `ServerCallRequest` (its size and depth: the JSON walk's bound; the server's limits apply when it stores it). */
export const serverCallRequest: Check = record({
  place: text({ max: 200 }),
  epoch,
  conversationId: id,
  taskId: id,
  callId,
  tool: toolName,
  arguments: objectOf,
  replay,
});

const toolResultView: Check = record({ content: list(contentItem, 1000), isError: flag }, { details: json });

/** A `ServerCallAnswer`. */
export const serverCallAnswer: Check = record(
  { result: toolResultView, ending: literal("returned", "threw", "interrupted") },
  { message: text({ empty: true, max: 100_000 }), output: text({ empty: true }) },
);

const serializedError: Check = record(
  { name: text({ max: 200 }), message: text({ empty: true, max: 100_000 }) },
  { details: objectOf, stack: text({ empty: true, max: 100_000 }) },
);

/** A `ServerCallMessage`. */
export const serverCallMessage: Check = variant("type", {
  "server-call": record({ type: literal("server-call"), request: serverCallRequest }),
  "server-answer": record({ type: literal("server-answer"), conversationId: id, callId, epoch, answer: serverCallAnswer }),
  "server-refused": record({ type: literal("server-refused"), conversationId: id, callId, epoch, error: serializedError }),
});
