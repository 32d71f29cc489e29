import { defineExtension, registerBuiltin } from "../tasks/registry.ts";
import { CompactionTask } from "./compaction.ts";
import { GenerationTask } from "./generation.ts";
import { ToolTask } from "./tool-task.ts";

/** The agent's built-in tasks are part of every registry `createRegistry()` makes. */
registerBuiltin(defineExtension({ name: "pi", tasks: [GenerationTask, ToolTask, CompactionTask] }));
