/**
 * The pi-ai functions the agent calls, typed with the library's own shapes (model-types.ts): a message the
 * library stored or built is what pi-ai reads, so each crossing is a cast in this one place.
 */
import type { SystemMessage as PiSystemMessage, Tool } from "@earendil-works/pi-ai";
import { isRetryableAssistantError } from "@earendil-works/pi-ai/utils/retry";
import { getCurrentSystemMessage, getToolStateChanges, toToolDeclaration } from "@earendil-works/pi-ai/utils/transcript";
import type { ResolvedAgent } from "./agent.ts";
import type { AssistantMessage, Message, SystemMessage } from "./model-types.ts";

/** The system message in force at the end of `messages` (the leading one with every later change applied). */
export function currentSystemMessage(messages: readonly Message[]): SystemMessage | undefined {
  return getCurrentSystemMessage(messages as unknown as Parameters<typeof getCurrentSystemMessage>[0]);
}

/** Whether a failed answer is worth asking for again (an overload, a rate limit, a dropped connection). */
export function isRetryableAnswer(message: AssistantMessage): boolean {
  return isRetryableAssistantError(message as unknown as Parameters<typeof isRetryableAssistantError>[0]);
}

/**
 * The `pi.system` entry that brings the transcript's system prompt and tool declarations up to the agent's,
 * or undefined when they already match. It carries only the change: changed sections (null = removed) and
 * added/removed tools, so the transcript records when the prompt changed.
 */
export function planSystemMessage(current: SystemMessage | undefined, agent: ResolvedAgent, now: number): PiSystemMessage | undefined {
  const currentSections = current?.sections ?? {};
  const patch: Record<string, string | null> = {};
  for (const [key, text] of Object.entries(agent.sections)) if (currentSections[key] !== text) patch[key] = text;
  for (const key of Object.keys(currentSections)) if (!(key in agent.sections)) patch[key] = null;
  // The tools declared so far: pi-ai's system messages carry them (the library's type does not read them).
  const declared: Tool[] = (current as PiSystemMessage | undefined)?.toolsAdded ?? [];
  const wanted = [...agent.offered.values()].map((tool) => toToolDeclaration(tool as unknown as Tool));
  const { toolsAdded, toolsRemoved } = getToolStateChanges(declared, wanted);
  const sectionsChanged = Object.keys(patch).length > 0;
  if (!sectionsChanged && toolsAdded.length === 0 && toolsRemoved.length === 0) return undefined;
  return {
    role: "system",
    content: "",
    ...(sectionsChanged ? { sections: patch } : {}),
    ...(toolsAdded.length > 0 ? { toolsAdded } : {}),
    ...(toolsRemoved.length > 0 ? { toolsRemoved } : {}),
    timestamp: now,
  };
}
