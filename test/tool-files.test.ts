import { describe, expect, it } from "vitest";
import {
  defineExtension,
  FileNotFound,
  fileTools,
  InvalidPath,
  MemoryEnv,
  MemoryStorage,
  type ToolResultEntryPayload,
} from "../src/index.ts";
import { answer, callTools, createWorld, openAgent, ScriptedModels, texts } from "./agent-support.ts";
import { ctx } from "./support.ts";

describe("execution environments and file tools", () => {
  it("MemoryEnv keeps files under its root: normalized paths, no escape, FileNotFound for missing files", async () => {
    const env = new MemoryEnv({ "docs/a.txt": "A" });
    await env.append("./docs//b.txt", "b1", ctx);
    await env.append("docs/b.txt", "b2", ctx);
    expect(await env.read("docs/x/../b.txt", ctx)).toBe("b1b2");
    expect(await env.list("docs", ctx)).toEqual(["docs/a.txt", "docs/b.txt"]);
    await expect(env.read("../etc/passwd", ctx)).rejects.toBeInstanceOf(InvalidPath);
    await expect(env.read("missing.txt", ctx)).rejects.toBeInstanceOf(FileNotFound);
    await env.remove("docs/a.txt", ctx);
    expect(env.snapshot()).toEqual({ "docs/b.txt": "b1b2" });
  });

  it("the file tools work on the conversation's environment; reading and listing are replay-safe, writing is not", async () => {
    expect(Object.fromEntries(fileTools.map((tool) => [tool.name, tool.replay]))).toEqual({
      read: "safe",
      ls: "safe",
      write: "unsafe",
      edit: "unsafe",
      append: "unsafe",
      rm: "unsafe",
    });
    const world = createWorld();
    const models = new ScriptedModels([
      callTools([["write", { path: "notes.txt", text: "one\n" }, "c1"]]),
      callTools([
        ["append", { path: "notes.txt", text: "two\n" }, "c2"],
        ["ls", {}, "c3"],
      ]),
      callTools([
        ["read", { path: "notes.txt" }, "c4"],
        ["read", { path: "nope.txt" }, "c5"],
      ]),
      callTools([
        ["edit", { path: "notes.txt", oldText: "two", newText: "2" }, "c6"],
        ["edit", { path: "notes.txt", oldText: "zzz", newText: "" }, "c7"],
      ]),
      answer("done"),
    ]);
    const opened = await openAgent(new MemoryStorage(), { models, world, tools: [...fileTools] });
    expect(await (await opened.root.submit({ type: "input", content: "files" }, ctx)).wait(ctx)).toMatchObject({ status: "done" });
    const results = Object.fromEntries(
      (await opened.root.entries(ctx))
        .filter((entry) => entry.kind === "pi.tool-result")
        .map((entry) => (entry.payload as unknown as ToolResultEntryPayload).message)
        .map((message) => [message.toolCallId, [message.isError, texts(message).join("")]]),
    );
    expect(results).toEqual({
      c1: [false, "wrote notes.txt"],
      c2: [false, "appended to notes.txt"],
      c3: [false, "notes.txt"],
      c4: [false, "one\ntwo\n"],
      c5: [true, '<harness>\n[error] No file "nope.txt" in this environment.\n</harness>'],
      c6: [false, "edited notes.txt"],
      c7: [true, "<harness>\n[error] oldText does not occur in notes.txt; read the file and copy the text exactly.\n</harness>"],
    });
    expect(world.envs.get(opened.root.id).snapshot()).toEqual({ "notes.txt": "one\n2\n" });
    expect(defineExtension({ name: "files", tools: fileTools }).tools).toBe(fileTools);
  });
});
