/**
 * The shapes of what a caller gives the agent — a submission draft, its content items, a config change —
 * checked before anything is admitted, so nothing malformed is ever committed (a content item the model
 * provider cannot read would leave every later input of the conversation unanswered). The host's protocol
 * checks the same shapes at its door (src/host/protocol.ts).
 */
import { type Check, either, flag, json, list, literal, nullable, record, text, variant } from "../../shape.ts";

/** How many content items one input may carry. */
const MAX_CONTENT_ITEMS = 1000;
/** How many tool names a config may list. */
const MAX_TOOLS = 1000;

/** pi-ai's user content items: text, or an image as base64 `data` with its `mimeType`. */
export const contentItem: Check = variant("type", {
  text: record({ type: literal("text"), text: text({ empty: true }) }, { textSignature: text({ empty: true }) }),
  image: record({ type: literal("image"), data: text(), mimeType: text() }),
});

/** An input's content: a non-empty string, or a non-empty array of content items. */
export const userContent: Check = (value, path) => {
  if (typeof value === "string") return value === "" ? `${path} must not be empty` : undefined;
  if (Array.isArray(value) && value.length === 0) return `${path} must have at least one item`;
  return list(contentItem, MAX_CONTENT_ITEMS)(value, path);
};

/**
 * A content block of a written message: an object whose `type` is one `types` names, with the fields the
 * agent's context reads (a tool call's `id`, `name` and `arguments`); the rest is JSON.
 */
const blocks =
  (...types: readonly string[]): Check =>
  (value, path) =>
    list((block, at) => {
      const problem = json(block, at) ?? variant("type", Object.fromEntries(types.map((type) => [type, json])))(block, at);
      if (problem || (block as { type: string }).type !== "toolCall") return problem;
      const call = block as { id?: unknown; name?: unknown; arguments?: unknown };
      const args = call.arguments;
      return (
        text()(call.id, `${at}.id`) ??
        text()(call.name, `${at}.name`) ??
        (typeof args === "object" && args !== null && !Array.isArray(args) ? undefined : `${at}.arguments must be an object`)
      );
    }, MAX_CONTENT_ITEMS)(value, path);

/** A message's `content`: a string where its role allows one, else blocks of its role's types. */
const withContent =
  (content: Check): Check =>
  (value, path) =>
    json(value, path) ?? content((value as { content?: unknown }).content, `${path}.content`);

/**
 * A message in a written entry: one of pi-ai's roles with content the model provider can read (a message the
 * agent's context cannot derive would leave every later input of the conversation unanswered).
 */
const message: Check = variant("role", {
  user: withContent(userContent),
  assistant: withContent(blocks("text", "thinking", "toolCall")),
  toolResult: withContent(blocks("text", "image")),
  system: withContent(either(text({ empty: true }), blocks("text"))),
});

/** A written entry's kind: the app's own; `pi.` kinds are the agent's (a forged compaction would cut the context). */
const entryKind: Check = (value, path) =>
  text({ max: 200 })(value, path) ??
  ((value as string).startsWith("pi.") ? `${path} must not start with "pi." (the agent's own entry kinds)` : undefined);

const requestId = text({ max: 200 });

/** A `SubmissionDraft`. */
export const submissionDraft: Check = variant("type", {
  input: record({ type: literal("input"), content: userContent }, { requestId, whenBusy: literal("followUp", "steer", "reject") }),
  write: record({ type: literal("write"), entry: record({ kind: entryKind }, { message, data: json }) }, { requestId }),
});

/** A model: a `"provider/id"` string, or an object with a `provider` and an `id` (a pi-ai Model has more fields). */
const model: Check = either(text(), (value, path) => {
  const problem = json(value, path);
  if (problem) return problem;
  const ref = value as { provider?: unknown; id?: unknown } | null;
  if (typeof ref !== "object" || ref === null || Array.isArray(ref)) return `${path} must be "provider/id" or { provider, id }`;
  return text()(ref.provider, `${path}.provider`) ?? text()(ref.id, `${path}.id`);
});

/** An `AgentChange`: each field a new value, null to clear it, absent to keep it. */
export const agentChange: Check = record(
  {},
  { model: nullable(model), instructions: nullable(text({ empty: true })), tools: nullable(list(text(), MAX_TOOLS)) },
);

/** What is wrong with a draft, for `InvalidSubmission`; undefined when it may be admitted. */
export function draftProblem(draft: unknown): string | undefined {
  return submissionDraft(draft, "the draft");
}

/** The shape of a page tool's result (its size and depth are `settings.limits`', checked when it is committed). */
export const pageToolResult: Check = either(
  text({ empty: true }),
  record({}, { content: either(text({ empty: true }), list(contentItem, 1000)), isError: flag, details: json }),
);
