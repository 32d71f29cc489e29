/**
 * Server tools' calls on the follow link (decision 0036): a `call` of topic `server-tools`, method `call`, whose one
 * argument is a `ServerCallRequest`, answered by an `answer` whose value is a `ServerCallAnswer` (wire.ts carries
 * both, `FOLLOW_TOPICS` holds the topic's row). The checks here run where each arrives: the link is a stranger's.
 */
import { contentItem } from "../agent/conversation/drafts.ts";
import { type ArgsCheck, args, type Check, flag, id, integer, json, list, literal, record, text } from "../shape.ts";

export const SERVER_TOOLS_TOPIC = "server-tools";

const callId = text({ max: 200 });
const objectOf: Check = (value, path) =>
  json(value, path) ??
  (typeof value === "object" && value !== null && !Array.isArray(value) ? undefined : `${path} must be an object of arguments`);

/** A `ServerCallRequest` (its size and depth: the JSON walk's bound; the server's limits apply when it stores it). */
export const serverCallRequest: Check = record({
  place: text({ max: 200 }),
  epoch: integer(1, Number.MAX_SAFE_INTEGER),
  conversationId: id,
  taskId: id,
  callId,
  tool: text({ max: 64 }),
  arguments: objectOf,
  replay: literal("safe", "unsafe"),
});

/** The topic's row in `FOLLOW_TOPICS`: the tab calls, the object answers, once per call id (its store). */
export const SERVER_TOOLS: { calledBy: "tab"; methods: Record<string, ArgsCheck>; keyed: readonly string[] } = {
  calledBy: "tab",
  keyed: ["call"], // by its call id (the store's key)
  methods: { call: args([serverCallRequest]) },
};

const toolResultView: Check = record({ content: list(contentItem, 1000), isError: flag }, { details: json });

/** A `ServerCallAnswer`. */
export const serverCallAnswer: Check = record(
  { result: toolResultView, ending: literal("returned", "threw", "interrupted") },
  { message: text({ empty: true, max: 100_000 }), output: text({ empty: true }) },
);
