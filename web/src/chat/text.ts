import type { ToolResultEntryPayload, UserEntryPayload } from "pi-durable-web";

/** A message's content as plain text (non-text parts as `[type]`). */
export function textOf(content: UserEntryPayload["message"]["content"] | ToolResultEntryPayload["message"]["content"]): string {
  if (typeof content === "string") return content;
  return content.map((part) => (part.type === "text" ? part.text : `[${part.type}]`)).join("");
}

/** JSON on one line, cut at 160 characters. */
export function compactJson(value: unknown): string {
  const text = JSON.stringify(value) ?? "";
  return text.length > 160 ? `${text.slice(0, 157)}…` : text;
}
