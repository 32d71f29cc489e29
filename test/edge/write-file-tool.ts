import { defineTool } from "../../src/index.ts";

/** The tab's tool that asks a person first (the copy knows it as the tab does; it never runs it). */
export const writeFileTool = (execute: (path: string) => string | Promise<string>) =>
  defineTool<{ path: string }>({
    name: "write_file",
    description: "Write a file",
    parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
    approval: "always",
    execute: ({ path }) => execute(path),
  });
