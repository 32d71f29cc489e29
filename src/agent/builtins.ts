import { defineExtension, Registry } from "../tasks/registry.ts";
import { CompactionTask } from "./tasks/compaction.ts";
import { GenerationTask } from "./tasks/generation.ts";
import { ToolTask } from "./tasks/tool-task.ts";

/** The agent's built-in tasks: every registry a harness runs on has them (`Harness.open` checks). */
export const BUILTIN_TASKS = Object.freeze([GenerationTask, ToolTask, CompactionTask] as const);

/** The extension that carries them (`pi`), first in every registry `createRegistry()` makes. */
const BUILTIN_EXTENSION = defineExtension({ name: "pi", tasks: BUILTIN_TASKS });

/** A registry with the agent's built-in tasks; install your extensions into it. */
export function createRegistry(): Registry {
  return new Registry([BUILTIN_EXTENSION]);
}
