import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  applyViewUpdate,
  type Conversation,
  type ConversationViewState,
  ConversationViewStore,
  type ConversationViewUpdate,
  coalesceLiveFrames,
  defineTool,
  MemoryStorage,
  ViewUpdateOutOfOrder,
} from "../src/index.ts";
import { answer, callTool, createWorld, openAgent, ScriptedModels, settle, texts, until } from "./agent-support.ts";
import { ctx } from "./support.ts";

type Op =
  | { kind: "write"; data: number }
  | { kind: "configure"; instructions: string }
  | { kind: "answer"; text: string }
  | { kind: "tool"; chunks: string[] }
  | { kind: "watch"; page: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant("write" as const), data: fc.integer() }),
  fc.record({ kind: fc.constant("configure" as const), instructions: fc.string({ minLength: 1, maxLength: 8 }) }),
  fc.record({ kind: fc.constant("answer" as const), text: fc.string({ minLength: 1, maxLength: 12 }) }),
  fc.record({ kind: fc.constant("tool" as const), chunks: fc.array(fc.string({ minLength: 1, maxLength: 4 }), { maxLength: 3 }) }),
  fc.record({ kind: fc.constant("watch" as const), page: fc.integer({ min: 1, max: 6 }) }),
);

/** What a store that opened on the last page must equal: the full view from the store's first entry on. */
function expectSameView(store: ConversationViewState, full: ConversationViewState): void {
  const { entries, hasOlder, streaming, ...documents } = store;
  const { entries: all, hasOlder: _all, streaming: _none, ...fullDocuments } = full;
  expect(streaming).toBeUndefined();
  expect(documents).toEqual(fullDocuments);
  const first = entries[0]?.id ?? Infinity;
  expect(entries).toEqual(all.filter((entry) => entry.id >= first));
  expect(hasOlder).toBe(all.some((entry) => entry.id < first));
}

async function watchInto(conversation: Conversation, page: number, updates: ConversationViewUpdate[] = []) {
  const store = new ConversationViewStore();
  const stop = conversation.watch(
    (update) => {
      updates.push(update);
      store.apply(update);
    },
    { page },
  );
  await until(() => store.state !== undefined, "the snapshot arrives");
  return { store, stop, updates };
}

describe("views as deltas", () => {
  it("a snapshot plus every commit's delta equals the full committed view, whenever the page subscribed and whatever its page size (property)", async () => {
    const echo = defineTool({
      name: "echo",
      description: "Streams its chunks",
      parameters: { type: "object", properties: { chunks: { type: "array", items: { type: "string" } } } },
      execute(args: { chunks: string[] }, api) {
        for (const chunk of args.chunks) api.output(chunk);
      },
    });
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 12 }), async (ops) => {
        const models = new ScriptedModels();
        const opened = await openAgent(new MemoryStorage(), {
          models,
          world: createWorld(),
          tools: [echo],
          settings: { progress: { persistWithinMs: 0 } },
        });
        const conversation = opened.root;
        const stores: ConversationViewStore[] = [(await watchInto(conversation, Infinity)).store];
        let call = 0;
        for (const step of ops) {
          if (step.kind === "write")
            await (await conversation.submit({ type: "write", entry: { kind: "app.note", data: step.data } }, ctx)).wait(ctx);
          else if (step.kind === "configure") await conversation.configure({ instructions: step.instructions }, ctx);
          else if (step.kind === "watch") stores.push((await watchInto(conversation, step.page)).store);
          else {
            if (step.kind === "answer") models.script(answer(step.text));
            else models.script(callTool("echo", { chunks: step.chunks }, `c${++call}`), answer("echoed"));
            await (await conversation.submit({ type: "input", content: "go" }, ctx)).wait(ctx);
          }
          await settle(4);
          const full = await conversation.view(ctx);
          for (const store of stores) expectSameView(store.state!, full);
        }
        await opened.harness.close(ctx);
      }),
      { numRuns: 25 },
    );
  });

  it("a streamed update's size does not grow with the conversation: a commit sends only what it changed", async () => {
    const sizes: number[] = [];
    for (const length of [10, 1_000]) {
      const models = new ScriptedModels([{ hang: "Partial ans" }]);
      const opened = await openAgent(new MemoryStorage(), { models, world: createWorld() });
      await opened.root.commit((tx) => {
        for (let i = 0; i < length; i++) tx.appendEntry({ kind: "app.note", payload: { i } });
      }, ctx);
      const { store, updates } = await watchInto(opened.root, 200);
      expect(store.state!.entries).toHaveLength(Math.min(length, 200));
      expect(store.state!.hasOlder).toBe(length > 200);
      await opened.root.submit({ type: "input", content: "talk" }, ctx);
      await until(() => models.hanging === 1, "streaming");
      await settle();
      const before = updates.length;
      opened.clock.advance(1000); // the partial is persisted: one progress commit
      await until(() => store.state!.live.generation?.message !== undefined, "the progress commit arrives");
      const commits = updates.slice(before).filter((update) => update.type === "commit");
      expect(commits).toHaveLength(1);
      expect(commits[0]!.entries).toBeUndefined();
      sizes.push(JSON.stringify(commits[0]).replace(/\d+/g, "0").length); // ids and times aside
      await opened.harness.close(ctx);
    }
    expect(sizes[1]).toBe(sizes[0]);
  });

  it("a long conversation opens on its last page; older pages load on demand, oldest last", async () => {
    const opened = await openAgent(new MemoryStorage(), { models: new ScriptedModels(), world: createWorld() });
    await opened.root.commit((tx) => {
      for (let i = 0; i < 450; i++) tx.appendEntry({ kind: "app.note", payload: { i } });
    }, ctx);
    const { store } = await watchInto(opened.root, 200);
    expect(store.state!.entries.map((entry) => (entry.payload as { i: number }).i)).toEqual(Array.from({ length: 200 }, (_, i) => 250 + i));
    while (store.state!.hasOlder) {
      const page = await opened.root.entriesBefore(store.state!.entries[0]!.id, 200, ctx);
      store.prepend(page.entries, page.hasOlder);
    }
    expect(store.state!.entries).toEqual((await opened.root.view(ctx)).entries);
    await opened.harness.close(ctx);
  });

  it("S9 a partial answer reaches a watcher live before it is persisted, marked as streaming; the commit that persists it supersedes it", async () => {
    const models = new ScriptedModels([{ hang: "Partial ans" }]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld() });
    const { store } = await watchInto(opened.root, 200);
    await opened.root.submit({ type: "input", content: "talk" }, ctx);
    await until(() => store.state!.streaming?.answer !== undefined, "the live partial arrives");
    const streaming = store.state!;
    expect(texts(streaming.streaming!.answer!.message)).toEqual(["Partial ans"]);
    expect(streaming.live.generation?.message).toBeUndefined(); // nothing of it is committed yet
    expect((await opened.root.view(ctx)).live.generation?.message).toBeUndefined();
    opened.clock.advance(1000);
    await until(() => store.state!.live.generation?.message !== undefined, "the partial is persisted");
    expect(store.state!.streaming).toBeUndefined();
    await opened.harness.close(ctx);
  });

  it("S8 a tool's output reaches a watcher live before it is persisted; the result commit supersedes it", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const work = defineTool({
      name: "work",
      description: "Works",
      parameters: { type: "object", properties: {} },
      async execute(_args, api) {
        api.output("step 1\n");
        await gate;
        return "worked";
      },
    });
    const models = new ScriptedModels([callTool("work", {}, "c1"), answer("done")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld(), tools: [work] });
    const { store } = await watchInto(opened.root, 200);
    const submission = await opened.root.submit({ type: "input", content: "work" }, ctx);
    await until(() => store.state!.streaming?.tools !== undefined, "the live output arrives");
    const taskId = store.state!.live.tools![0]!.taskId!;
    expect(store.state!.streaming!.tools).toEqual({ [taskId]: "step 1\n" });
    expect(store.state!.live.tools![0]!.output).toBeUndefined();
    release();
    await submission.wait(ctx);
    await settle();
    expect(store.state!.streaming).toBeUndefined();
    await opened.harness.close(ctx);
  });

  it("live text of an attempt that a commit ended is dropped, also when its frame arrives after that commit", () => {
    const message = (text: string) => ({ ...(answer(text) as object), content: [{ type: "text", text }] }) as never;
    const base = { conversationId: 1, entries: [], inbox: { items: [] }, usage: { models: {} }, agent: {}, hasOlder: false };
    let state = applyViewUpdate(undefined, {
      type: "snapshot",
      ...base,
      busy: true,
      live: { run: { taskId: 7, inputs: [1], startedAt: 0 }, generation: { attempt: 1 } },
    });
    state = applyViewUpdate(state, { type: "live", answer: { taskId: 7, attempt: 1, message: message("Hel") } });
    expect(state.streaming?.answer?.attempt).toBe(1);
    state = applyViewUpdate(state, {
      type: "commit",
      live: { run: { taskId: 7, inputs: [1], startedAt: 0 }, generation: { attempt: 2, retry: { at: 5, error: "cut" } } },
    });
    expect(state.streaming).toBeUndefined();
    state = applyViewUpdate(state, { type: "live", answer: { taskId: 7, attempt: 1, message: message("Hello") } });
    expect(state.streaming).toBeUndefined();
    expect(Object.isFrozen(state)).toBe(true);
    expect(() => applyViewUpdate(undefined, { type: "commit" })).toThrow(ViewUpdateOutOfOrder);
  });
});

describe("live frames", () => {
  it("at most one live message per frame: the first goes at once, what comes during the frame is merged to the newest and sent when it ends; commits pass at once", () => {
    const sent: ConversationViewUpdate[] = [];
    const frames: Array<() => void> = [];
    const listener = coalesceLiveFrames(
      (update) => sent.push(update),
      (callback) => frames.push(callback),
    );
    const message = (text: string) => ({ role: "assistant", content: [{ type: "text", text }] }) as never;
    const answer = (text: string) => ({ taskId: 1, attempt: 1, message: message(text) });
    listener({ type: "live", answer: answer("H") });
    expect(sent).toEqual([{ type: "live", answer: answer("H") }]); // the line was idle: no wait
    for (const text of ["He", "Hel"]) listener({ type: "live", answer: answer(text) });
    listener({ type: "live", tools: { 5: "a" } });
    listener({ type: "live", tools: { 6: "b" } });
    listener({ type: "commit", inbox: { items: [] } });
    expect(sent.slice(1)).toEqual([{ type: "commit", inbox: { items: [] } }]);
    expect(frames).toHaveLength(1);
    frames.shift()!();
    expect(sent[2]).toEqual({ type: "live", answer: answer("Hel"), tools: { 5: "a", 6: "b" } });
    expect(frames).toHaveLength(1); // a frame that sent something is followed by another cooldown
    frames.shift()!();
    expect(sent).toHaveLength(3);
    expect(frames).toHaveLength(0); // idle again
    listener({ type: "live", tools: { 5: "ab" } });
    expect(sent[3]).toEqual({ type: "live", tools: { 5: "ab" } });
  });
});
