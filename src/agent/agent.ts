import type { Extension, InstalledExtensions } from "../tasks/types.ts";
import type { AgentHooks, AnyTool } from "./tool.ts";
import type { AgentConfig } from "./types.ts";

/** What an extension may bring to the agent, next to its task definitions. */
export interface AgentExtension extends Extension {
  readonly tools?: readonly AnyTool[];
  readonly hooks?: AgentHooks;
  /** Text added to the system prompt of every conversation (as a section named after the extension). */
  readonly instructions?: string;
}

/** The agent a conversation has right now: its config resolved against the installed extensions. */
export interface ResolvedAgent {
  config: AgentConfig;
  /** Every installed tool by name (a later extension's tool replaces an earlier one of the same name). */
  installed: Map<string, AnyTool>;
  /** The tools offered to the model: `config.tools` if set (names that resolve), else every installed tool. */
  offered: Map<string, AnyTool>;
  hooks: Array<{ extension: string; hooks: AgentHooks }>;
  /** System prompt sections in order: each extension's instructions, then the conversation's. */
  sections: Record<string, string>;
}

/** Resolves fresh at every use, so an extension installed or replaced since is seen at the next step. */
export function resolveAgent(registry: InstalledExtensions, config: AgentConfig): ResolvedAgent {
  const installed = new Map<string, AnyTool>();
  const hooks: ResolvedAgent["hooks"] = [];
  const sections: Record<string, string> = {};
  for (const extension of registry.extensions as readonly AgentExtension[]) {
    for (const tool of extension.tools ?? []) installed.set(tool.name, tool);
    if (extension.hooks) hooks.push({ extension: extension.name, hooks: extension.hooks });
    if (typeof extension.instructions === "string" && extension.instructions !== "")
      sections[`extension:${extension.name}`] = extension.instructions;
  }
  if (typeof config.instructions === "string" && config.instructions !== "") sections.instructions = config.instructions;
  const offered = new Map<string, AnyTool>();
  if (config.tools) {
    for (const name of config.tools) {
      const tool = installed.get(name);
      if (tool) offered.set(name, tool);
    }
  } else {
    for (const [name, tool] of installed) offered.set(name, tool);
  }
  return { config, installed, offered, hooks, sections };
}
