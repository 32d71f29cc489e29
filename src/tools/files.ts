import { type AnyTool, defineTool } from "../agent/tool.ts";
import type { ExecutionEnv } from "../env/types.ts";

/**
 * File tools over the conversation's `ExecutionEnv`. Reading and listing are `replay: "safe"` (running them
 * again after a crash changes nothing); writing, appending and removing are `"unsafe"`: after a crash the
 * model is told the call may have partially run instead of the harness doing it twice (S8).
 */
const pathParameter = { type: "string", description: "A path relative to the environment's root, e.g. notes.txt" } as const;

export const readFileTool = defineTool<{ path: string }>({
  name: "read",
  description: "Read a text file.",
  parameters: { type: "object", properties: { path: pathParameter }, required: ["path"], additionalProperties: false },
  replay: "safe",
  async execute({ path }, api, context) {
    return (await api.env<ExecutionEnv>()).read(path, context);
  },
});

export const listFilesTool = defineTool<{ directory?: string }>({
  name: "ls",
  description: "List the files under a directory (default: every file).",
  parameters: { type: "object", properties: { directory: pathParameter }, additionalProperties: false },
  replay: "safe",
  async execute({ directory }, api, context) {
    const files = await (await api.env<ExecutionEnv>()).list(directory, context);
    return files.length === 0 ? "(no files)" : files.join("\n");
  },
});

export const writeFileTool = defineTool<{ path: string; text: string }>({
  name: "write",
  description: "Create or replace a text file.",
  parameters: {
    type: "object",
    properties: { path: pathParameter, text: { type: "string" } },
    required: ["path", "text"],
    additionalProperties: false,
  },
  replay: "unsafe",
  async execute({ path, text }, api, context) {
    await (await api.env<ExecutionEnv>()).write(path, text, context);
    return `wrote ${path}`;
  },
});

export const appendFileTool = defineTool<{ path: string; text: string }>({
  name: "append",
  description: "Append text to a file (created when missing).",
  parameters: {
    type: "object",
    properties: { path: pathParameter, text: { type: "string" } },
    required: ["path", "text"],
    additionalProperties: false,
  },
  replay: "unsafe",
  async execute({ path, text }, api, context) {
    await (await api.env<ExecutionEnv>()).append(path, text, context);
    return `appended to ${path}`;
  },
});

export const removeFileTool = defineTool<{ path: string }>({
  name: "rm",
  description: "Delete a file.",
  parameters: { type: "object", properties: { path: pathParameter }, required: ["path"], additionalProperties: false },
  replay: "unsafe",
  async execute({ path }, api, context) {
    await (await api.env<ExecutionEnv>()).remove(path, context);
    return `removed ${path}`;
  },
});

export const editFileTool = defineTool<{ path: string; oldText: string; newText: string }>({
  name: "edit",
  description: "Replace one exact occurrence of oldText in a file with newText. Fails when oldText occurs zero or several times.",
  parameters: {
    type: "object",
    properties: { path: pathParameter, oldText: { type: "string", minLength: 1 }, newText: { type: "string" } },
    required: ["path", "oldText", "newText"],
    additionalProperties: false,
  },
  replay: "unsafe",
  async execute({ path, oldText, newText }, api, context) {
    const env = await api.env<ExecutionEnv>();
    const text = await env.read(path, context);
    const first = text.indexOf(oldText);
    if (first < 0) throw new Error(`oldText does not occur in ${path}; read the file and copy the text exactly.`);
    if (text.indexOf(oldText, first + 1) >= 0)
      throw new Error(`oldText occurs more than once in ${path}; include more context so it is unique.`);
    await env.write(path, text.slice(0, first) + newText + text.slice(first + oldText.length), context);
    return `edited ${path}`;
  },
});

/** Every file tool, for an extension: `defineExtension({ name: "files", tools: fileTools })`. */
export const fileTools: readonly AnyTool[] = [readFileTool, listFilesTool, writeFileTool, editFileTool, appendFileTool, removeFileTool];
