import type { AssistantMessage } from "@earendil-works/pi-ai";
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
import { manualPace } from "./manual-pace.ts";
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
  const message = (...texts: string[]) =>
    ({ role: "assistant", content: texts.map((text) => ({ type: "text", text })), stopReason: "stop" }) as unknown as AssistantMessage;
  const answerOf = (...texts: string[]) => ({ taskId: 1, attempt: 1, message: message(...texts) });

  it("at most one live frame per frame: one goes at once when the last left a frame ago, else it waits only for the rest of that frame, merged with what else came; commits pass at once", () => {
    const sent: ConversationViewUpdate[] = [];
    const pace = manualPace();
    const listener = coalesceLiveFrames((update) => sent.push(update), pace);
    const store = new ConversationViewStore();
    const snapshot = {
      type: "snapshot" as const,
      conversationId: 1,
      entries: [],
      hasOlder: false,
      inbox: { items: [] },
      usage: { models: {} },
      agent: {},
      busy: true,
      live: {
        run: { taskId: 1, inputs: [1], startedAt: 0 },
        generation: { attempt: 1 },
        tools: [5, 6].map((taskId) => ({ callId: `c${taskId}`, name: "t", taskId, status: "running" as const })),
      },
    };
    listener(snapshot);
    listener({ type: "live", answer: answerOf("H") });
    expect(sent).toHaveLength(2); // the line was idle: no wait
    pace.advanceTo(5);
    for (const text of ["He", "Hel"]) listener({ type: "live", answer: answerOf(text) });
    listener({ type: "live", tools: { 5: "a" } });
    listener({ type: "live", tools: { 6: "b" } });
    listener({ type: "commit", inbox: { items: [] } });
    expect(sent.slice(2)).toEqual([{ type: "commit", inbox: { items: [] } }]);
    expect(pace.timers.map((timer) => timer.at)).toEqual([16]); // the rest of the frame, not a whole one
    pace.advanceTo(16);
    expect(sent).toHaveLength(4);
    for (const update of sent) store.apply(update);
    expect(store.state!.streaming).toEqual({ answer: answerOf("Hel"), tools: { 5: "a", 6: "b" } });
    pace.advanceTo(40);
    listener({ type: "live", tools: { 5: "ab" } });
    expect(sent).toHaveLength(5); // a frame after the last one ended goes at once
    expect(sent[4]).toEqual({ type: "live", seq: 3, tools: { 5: { at: 1, text: "b" } } });
    expect(pace.timers).toHaveLength(0);
  });

  it("a frame that had to wait does not make the next chunk wait: a frame counts from its newest chunk's arrival, not from a late timer", () => {
    const sent: ConversationViewUpdate[] = [];
    const pace = manualPace();
    const listener = coalesceLiveFrames((update) => sent.push(update), pace);
    listener({
      type: "snapshot",
      conversationId: 1,
      entries: [],
      hasOlder: false,
      inbox: { items: [] },
      usage: { models: {} },
      agent: {},
      busy: true,
      live: {},
    });
    listener({ type: "live", tools: { 5: "a" } }); // at 0: at once
    pace.time = 10;
    listener({ type: "live", tools: { 5: "ab" } }); // waits for the rest of the frame
    pace.advanceTo(21); // the timer fires late (a busy worker)
    expect(sent).toHaveLength(3);
    pace.time = 26.5; // a chunk's pace later than the one sent at 21
    listener({ type: "live", tools: { 5: "abc" } });
    expect(sent).toHaveLength(4);
    expect(sent[3]).toEqual({ type: "live", seq: 3, tools: { 5: { at: 2, text: "c" } } });
  });

  it("frames carry only what is new: each frame's size follows the text it adds, not the answer so far", () => {
    const sent: ConversationViewUpdate[] = [];
    const listener = coalesceLiveFrames((update) => sent.push(update));
    const store = new ConversationViewStore();
    listener({
      type: "snapshot",
      conversationId: 1,
      entries: [],
      hasOlder: false,
      inbox: { items: [] },
      usage: { models: {} },
      agent: {},
      busy: true,
      live: { run: { taskId: 1, inputs: [1], startedAt: 0 }, generation: { attempt: 1 } },
    });
    let text = "";
    for (let chunk = 0; chunk < 500; chunk++) {
      text += "word ";
      listener({ type: "live", answer: answerOf(text) });
    }
    for (const update of sent) store.apply(update);
    expect(store.state!.streaming!.answer).toEqual(answerOf(text));
    const sizes = sent.slice(2).map((update) => JSON.stringify(update).replace(/\d+/g, "0").length); // offsets aside
    expect(new Set(sizes).size).toBe(1); // every frame after the first is the same small append
    expect(sizes[0]! * 10).toBeLessThan(JSON.stringify(answerOf(text)).length);
  });

  type Step =
    | { kind: "grow"; block: number; text: string }
    | { kind: "block"; type: "text" | "thinking" | "toolCall"; text: string }
    | { kind: "rewrite"; block: number; text: string }
    | { kind: "fields"; stopReason: string }
    | { kind: "attempt" }
    | { kind: "tool"; taskId: number; text: string; reset: boolean }
    | { kind: "end-tool"; taskId: number }
    | { kind: "send" };

  const step: fc.Arbitrary<Step> = fc.oneof(
    {
      weight: 5,
      arbitrary: fc.record({ kind: fc.constant("grow" as const), block: fc.nat(3), text: fc.string({ minLength: 1, maxLength: 5 }) }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant("block" as const),
        type: fc.constantFrom("text" as const, "thinking" as const, "toolCall" as const),
        text: fc.string({ maxLength: 4 }),
      }),
    },
    fc.record({ kind: fc.constant("rewrite" as const), block: fc.nat(3), text: fc.string({ maxLength: 4 }) }),
    fc.record({ kind: fc.constant("fields" as const), stopReason: fc.constantFrom("stop", "toolUse", "length") }),
    fc.record({ kind: fc.constant("attempt" as const) }),
    {
      weight: 3,
      arbitrary: fc.record({
        kind: fc.constant("tool" as const),
        taskId: fc.integer({ min: 5, max: 7 }),
        text: fc.string({ minLength: 1, maxLength: 4 }),
        reset: fc.boolean(),
      }),
    },
    fc.record({ kind: fc.constant("end-tool" as const), taskId: fc.integer({ min: 5, max: 7 }) }),
    { weight: 3, arbitrary: fc.record({ kind: fc.constant("send" as const) }) },
  );

  it("applied in order, the frames of a subscription give the receiver exactly the newest text: appends, new and rewritten blocks, another attempt, tools that start over or end (property)", () => {
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 40 }), (steps) => {
        const sent: ConversationViewUpdate[] = [];
        const pace = manualPace();
        const listener = coalesceLiveFrames((update) => sent.push(update), pace);
        const decoder = new ConversationViewStore();
        let attempt = 1;
        let content: Array<Record<string, unknown>> = [{ type: "text", text: "" }];
        let stopReason = "stop";
        const outputs = new Map<number, string>();
        const running = new Set<number>([5, 6, 7]);
        const live = () => ({
          run: { taskId: 1, inputs: [1], startedAt: 0 },
          generation: { attempt },
          tools: [5, 6, 7].map((taskId) => ({
            callId: `c${taskId}`,
            name: "t",
            taskId,
            status: running.has(taskId) ? ("running" as const) : ("done" as const),
          })),
        });
        listener({
          type: "snapshot",
          conversationId: 1,
          entries: [],
          hasOlder: false,
          inbox: { items: [] },
          usage: { models: {} },
          agent: {},
          busy: true,
          live: live(),
        });
        const current = () => ({
          taskId: 1,
          attempt,
          message: { role: "assistant", content: structuredClone(content), stopReason } as unknown as AssistantMessage,
        });
        for (const [index, next] of steps.entries()) {
          pace.advanceTo(index * 7); // frames coalesce about every other step
          if (next.kind === "send") continue;
          if (next.kind === "tool") {
            if (!running.has(next.taskId)) continue;
            const output = (next.reset ? "" : (outputs.get(next.taskId) ?? "")) + next.text;
            outputs.set(next.taskId, output);
            listener({ type: "live", tools: { [next.taskId]: output } });
            continue;
          }
          if (next.kind === "end-tool") {
            running.delete(next.taskId);
            listener({ type: "commit", live: live() });
            continue;
          }
          if (next.kind === "grow") {
            const block = content[next.block % content.length]!;
            if (block.type === "toolCall")
              block.arguments = { value: `${String((block.arguments as { value: string }).value)}${next.text}` };
            else block[block.type === "text" ? "text" : "thinking"] += next.text;
          } else if (next.kind === "block")
            content.push(
              next.type === "toolCall"
                ? { type: "toolCall", id: `t${content.length}`, name: "t", arguments: { value: next.text } }
                : { type: next.type, [next.type === "text" ? "text" : "thinking"]: next.text },
            );
          else if (next.kind === "rewrite") content[next.block % content.length] = { type: "text", text: next.text };
          else if (next.kind === "fields") stopReason = next.stopReason;
          else {
            attempt += 1;
            content = [{ type: "text", text: "" }];
            listener({ type: "commit", live: live() });
          }
          listener({ type: "live", answer: current() });
        }
        pace.advanceTo(steps.length * 7 + 16);
        for (const update of sent) decoder.apply(update);
        const received = (decoder as unknown as { state: ConversationViewState }).state;
        expect(received.streaming?.answer ?? current()).toEqual(current());
        for (const [taskId, output] of outputs) if (running.has(taskId)) expect(received.streaming?.tools?.[taskId]).toBe(output);
      }),
      { numRuns: 300 },
    );
  });

  it("a frame of appended text that does not fit what the receiver holds is dropped, not shown garbled", () => {
    const base = { conversationId: 1, entries: [], inbox: { items: [] }, usage: { models: {} }, agent: {}, hasOlder: false };
    const state = applyViewUpdate(undefined, {
      type: "snapshot",
      ...base,
      busy: true,
      live: { run: { taskId: 1, inputs: [1], startedAt: 0 }, generation: { attempt: 1 } },
    });
    const next = applyViewUpdate(state, {
      type: "live",
      answer: { taskId: 1, attempt: 1, size: 1, grown: { index: 0, at: 3, text: "lo" }, from: 1, blocks: [] },
    });
    expect(next.streaming).toBeUndefined();
    const shown = applyViewUpdate(state, { type: "live", answer: answerOf("Hel") });
    expect(
      applyViewUpdate(shown, {
        type: "live",
        answer: { taskId: 1, attempt: 1, size: 1, grown: { index: 0, at: 3, text: "lo" }, from: 1, blocks: [] },
      }).streaming?.answer,
    ).toEqual(answerOf("Hello"));
  });
});
