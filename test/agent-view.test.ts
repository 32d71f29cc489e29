import { describe, expect, it } from "vitest";
import { type ConversationViewState, defineTool, MemoryStorage } from "../src/index.ts";
import { answer, callTool, createWorld, kinds, openAgent, ScriptedModels, settle, texts, until } from "./agent-support.ts";
import { ctx } from "./support.ts";

describe("conversation views", () => {
  it("a subscriber sees each committed step of a run, and running tool output only once it is persisted", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started = false;
    const work = defineTool({
      name: "work",
      description: "Works",
      parameters: { type: "object", properties: {} },
      async execute(_args, api) {
        api.output("step 1\n");
        started = true;
        await gate;
        return "worked";
      },
    });
    const storage = new MemoryStorage();
    const models = new ScriptedModels([callTool("work", {}, "c1"), answer("all done")]);
    const opened = await openAgent(storage, { models, world: createWorld(), tools: [work] });
    const seen: ConversationViewState[] = [];
    const stored: number[] = [];
    const unsubscribe = opened.root.subscribe((view) => {
      seen.push(view);
      // Never ahead of storage: every entry a view shows is already stored.
      void storage
        .listEntries(opened.root.id)
        .then((entries) => stored.push(view.entries.every((entry) => entries.some((e) => e.id === entry.id)) ? 1 : 0));
    });
    const submission = await opened.root.submit({ type: "input", content: "work" }, ctx);
    await until(() => started, "the tool runs");
    await settle();
    const running = seen.at(-1)!;
    expect(running.busy).toBe(true);
    expect(running.live.tools).toEqual([{ callId: "c1", name: "work", taskId: expect.any(Number), status: "running" }]);

    opened.clock.advance(1000);
    await until(() => seen.at(-1)!.live.tools?.[0]?.output === "step 1\n", "the persisted output reaches the view");

    release();
    await submission.wait(ctx);
    await settle();
    const last = seen.at(-1)!;
    expect(last.busy).toBe(false);
    expect(last.live).toEqual({});
    expect(kinds(last.entries)).toEqual(["pi.user", "pi.system", "pi.assistant", "pi.tool-result", "pi.assistant"]);
    expect(texts((last.entries.at(-1)!.payload as { message: { content: unknown } }).message)).toEqual(["all done"]);
    expect(Object.isFrozen(last)).toBe(true);
    expect(stored.every((ok) => ok === 1)).toBe(true);

    const count = seen.length;
    unsubscribe();
    await (await opened.root.submit({ type: "write", entry: { kind: "app.note" } }, ctx)).wait(ctx);
    await settle();
    expect(seen).toHaveLength(count);
  });

  it("a streamed partial answer is not in the view before it is persisted (persistWithinMs), then it is", async () => {
    const models = new ScriptedModels([{ hang: "Partial ans" }]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld() });
    let latest: ConversationViewState | undefined;
    opened.root.subscribe((view) => (latest = view));
    await opened.root.submit({ type: "input", content: "talk" }, ctx);
    await until(() => models.hanging === 1, "streaming");
    await settle();
    expect(latest!.live.generation).toEqual({ attempt: 1, requestedAt: expect.any(Number) });
    opened.clock.advance(999);
    await settle();
    expect(latest!.live.generation?.message).toBeUndefined();
    opened.clock.advance(1);
    await until(() => latest!.live.generation?.message !== undefined, "the partial is persisted");
    expect(texts(latest!.live.generation!.message!)).toEqual(["Partial ans"]);
  });
});
