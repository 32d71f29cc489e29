import { afterEach, describe, expect, it } from "vitest";
import {
  type AssistantEntryPayload,
  type Conversation,
  createRegistry,
  type EntryRecord,
  Harness,
  MemoryStorage,
  memoryEnvs,
  type ToolResultEntryPayload,
} from "../src/index.ts";
import { createDemoModels } from "../worker/models.ts";
import { STORY } from "../worker/offline-model.ts";
import { ASK_BEFORE_WRITING, ASK_PERSON, askBeforeWriting, OFFLINE_COMMANDS, OFFLINE_MODEL, PROBE } from "../worker/protocol.ts";
import { filesExtension, pageToolsExtension } from "../worker/tools.ts";
import { until } from "./agent-support.ts";
import { ctx } from "./support.ts";

// The demo worker's offline model (a scripted agent on pi-ai's faux provider) over the demo's file tools,
// driven through the real harness in memory. The browser, the reload and the seed's probe are in
// e2e/agent.e2e.ts; here: what each command does, without pauses (no streaming pace, no probe wait).

let harness: Harness | undefined;

afterEach(async () => {
  await harness?.close(ctx);
  harness = undefined;
});

async function openDemoAgent(options: { tools?: string[] } = {}) {
  const envs = memoryEnvs();
  const registry = createRegistry().install(filesExtension("unsafe", 0)).install(pageToolsExtension);
  const models = createDemoModels({ tokensPerSecond: 0 });
  harness = await Harness.open(new MemoryStorage(), { registry, models: models.models, env: envs }, ctx);
  const root = await harness.root(ctx, {
    agent: { model: `${OFFLINE_MODEL.provider}/${OFFLINE_MODEL.id}`, ...(options.tools ? { tools: options.tools } : {}) },
  });
  return { root, envs, models };
}

/** Submits `content` and returns the answer text and the entries the turn added. */
async function say(root: Conversation, content: string) {
  const before = (await root.entries(ctx)).length;
  const outcome = await (await root.submit({ type: "input", content }, ctx)).wait(ctx);
  const added = (await root.entries(ctx)).slice(before);
  return { outcome, text: outcome.status === "done" ? (outcome.answer?.text ?? "") : "", added };
}

function calls(entries: readonly EntryRecord[]) {
  return entries
    .filter((entry) => entry.kind === "pi.assistant")
    .flatMap((entry) => (entry.payload as unknown as AssistantEntryPayload).message.content)
    .filter((block) => block.type === "toolCall")
    .map((block) => ({ id: block.id, name: block.name, arguments: block.arguments }));
}

function results(entries: readonly EntryRecord[]) {
  return entries
    .filter((entry) => entry.kind === "pi.tool-result")
    .map((entry) => (entry.payload as unknown as ToolResultEntryPayload).message);
}

describe("the offline demo model", () => {
  it("note, read notes, list files, forget notes: one file tool call each, with call ids that count up, and an answer from the results", async () => {
    const { root, envs } = await openDemoAgent();

    const note = await say(root, "note buy milk");
    expect(calls(note.added)).toEqual([{ id: "call_1", name: "append", arguments: { path: "notes.txt", text: "buy milk\n" } }]);
    expect(results(note.added).map((result) => [result.isError, result.content])).toEqual([
      [false, [{ type: "text", text: "appended to notes.txt" }]],
    ]);
    expect(note.text).toBe('Added "buy milk" to notes.txt.');
    await say(root, "Remember: call Ada.");
    expect(envs.get(root.id).snapshot()).toEqual({ "notes.txt": "buy milk\ncall Ada.\n" });

    const read = await say(root, "Read notes.txt");
    expect(calls(read.added)).toEqual([{ id: "call_3", name: "read", arguments: { path: "notes.txt" } }]);
    expect(read.text).toBe("notes.txt holds:\nbuy milk\ncall Ada.\n");

    expect((await say(root, "list files")).text).toBe("The files:\nnotes.txt");
    expect((await say(root, "forget notes")).text).toBe("Deleted notes.txt.");
    expect((await say(root, "show notes")).text).toBe('There is no notes.txt yet. Add a line with "note <text>".');
    expect((await say(root, "ls")).text).toBe("There are no files yet.");
    expect(envs.get(root.id).snapshot()).toEqual({});
  });

  it("a note is the library's append, not the probe: it answers while the probe would still be waiting", async () => {
    const envs = memoryEnvs();
    const registry = createRegistry().install(filesExtension("unsafe", 600_000)); // a probe would wait 10 minutes
    harness = await Harness.open(
      new MemoryStorage(),
      { registry, models: createDemoModels({ tokensPerSecond: 0 }).models, env: envs },
      ctx,
    );
    const root = await harness.root(ctx, { agent: { model: `${OFFLINE_MODEL.provider}/${OFFLINE_MODEL.id}` } });
    const note = await say(root, "note buy milk");
    expect(note.outcome.status).toBe("done");
    expect(calls(note.added).map((call) => call.name)).toEqual(["append"]);
    expect(PROBE.tool).not.toBe("append");
    expect(envs.get(root.id).snapshot()).toEqual({ "notes.txt": "buy milk\n" });
  });

  it("probe is the seed's probe call; story is the long answer; anything else gets the list of commands", async () => {
    const { root, envs } = await openDemoAgent();

    const probe = await say(root, "probe");
    expect(calls(probe.added)).toEqual([{ id: "call_1", name: PROBE.tool, arguments: { path: PROBE.path, text: PROBE.text } }]);
    expect(envs.get(root.id).snapshot()).toEqual({ [PROBE.path]: PROBE.text });
    // The result entry keeps what the tool streamed (a UI shows it after a reload; the model gets the result).
    const [entry] = probe.added.filter((added) => added.kind === "pi.tool-result");
    expect(entry!.payload).toMatchObject({ output: PROBE.output, message: { content: [{ type: "text", text: PROBE.result }] } });

    expect((await say(root, "story")).text).toBe(STORY);
    const other = await say(root, "what can you do?");
    expect(other.text.startsWith('You said "what can you do?". I am the offline demo model')).toBe(true);
    for (const { say: command } of OFFLINE_COMMANDS) expect(other.text).toContain(`- ${command}: `);
    expect(calls(other.added)).toEqual([]);
  });

  it("stop (conversation.abort) cuts the probe's wait short: the call ends aborted, the input unanswered", async () => {
    const envs = memoryEnvs();
    const registry = createRegistry().install(filesExtension("unsafe", 600_000));
    const settings = { progress: { persistWithinMs: 0 } };
    harness = await Harness.open(
      new MemoryStorage(),
      { registry, models: createDemoModels({ tokensPerSecond: 0 }).models, env: envs, settings },
      ctx,
    );
    const root = await harness.root(ctx, { agent: { model: `${OFFLINE_MODEL.provider}/${OFFLINE_MODEL.id}` } });
    const submission = await root.submit({ type: "input", content: "probe" }, ctx);
    const output = new Promise<void>((resolve) => root.subscribe((view) => view.live.tools?.[0]?.output === PROBE.output && resolve()));
    await output;
    await root.abort(ctx);
    expect(await submission.wait(ctx)).toMatchObject({ status: "unanswered", reason: "aborted" });
    const [result] = results(await root.entries(ctx));
    expect(result).toMatchObject({
      isError: true,
      content: [
        { type: "text", text: PROBE.output },
        { type: "text", text: "<harness>\n[error] Tool probe was aborted\n</harness>" },
      ],
    });
    expect(envs.get(root.id).snapshot()).toEqual({ [PROBE.path]: PROBE.text });
  });

  it("uses only the tools the conversation offers", async () => {
    const { root, envs } = await openDemoAgent({ tools: ["read", "ls"] });
    const note = await say(root, "note x");
    expect(calls(note.added)).toEqual([]);
    expect(note.text).toBe("I would use the append tool for that, but this conversation does not offer it (tools offered: ls, read).");
    expect(envs.get(root.id).snapshot()).toEqual({});
  });

  it("S10 answers a compaction's summary request with an account of the conversation", async () => {
    const { root } = await openDemoAgent();
    await say(root, "note one");
    await say(root, "hello");
    await say(root, "read notes");
    await harness!.waitForTask(await root.compact({}, ctx), ctx);
    const [compaction] = (await root.entries(ctx)).filter((entry) => entry.kind === "pi.compaction");
    const summary = (compaction!.payload as { message: { content: string } }).message.content;
    expect(summary).toContain('The user sent 2 messages to the offline demo model: "note one", "hello". Tool calls: append ×1.');
  });
});

describe("the demo's model choices", () => {
  it("lists the offline model; configure checks what the page sends", async () => {
    const models = createDemoModels({ tokensPerSecond: 0 });
    expect(models.list()).toEqual([{ ...OFFLINE_MODEL, label: "offline demo model", offline: true }]);
    await expect(models.configure({ kind: "gemini", apiKey: "k", model: "m" })).rejects.toThrow(
      /kind must be "openai-compatible", "openai" or "anthropic"/,
    );
    await expect(models.configure({ kind: "openai-compatible", baseUrl: "localhost:11434", model: "m" })).rejects.toThrow(
      /baseUrl must be an http\(s\) URL/,
    );
    await expect(models.configure({ kind: "anthropic", model: "m" })).rejects.toThrow(/apiKey must be a non-empty string/);
    const choices = await models.configure({ kind: "openai-compatible", baseUrl: "http://127.0.0.1:11434/v1/", model: "llama3.2" });
    expect(choices.at(-1)).toEqual({
      provider: "openai-compatible",
      id: "llama3.2",
      label: "llama3.2 at http://127.0.0.1:11434/v1",
      offline: false,
    });
    expect(models.models.getModel("openai-compatible", "llama3.2")).toMatchObject({
      api: "openai-completions",
      baseUrl: "http://127.0.0.1:11434/v1",
    });
  });
});

describe("ask before writing files (the demo's approval rule on its file tools)", () => {
  it("off, a note is written at once (the rule approves); on, the append waits for a person with its arguments and writes nothing until decided; a denial's reason reaches the answer; an approval writes once", async () => {
    const { root, envs } = await openDemoAgent();
    const flip = async (on: boolean) =>
      (await root.submit({ type: "write", entry: { kind: ASK_BEFORE_WRITING.kind, data: { on } } }, ctx)).wait(ctx);
    const notes = () => envs(root.id).read(PROBE.path, ctx);
    const waiting = async (content: string) => {
      const submission = await root.submit({ type: "input", content }, ctx);
      await until(() => root.pendingApprovals().length === 1, "the append waits for a decision");
      return { submission, pending: root.pendingApprovals()[0]! };
    };

    expect((await say(root, "note one")).text).toBe('Added "one" to notes.txt.');
    expect(root.pendingApprovals()).toEqual([]);
    await flip(true);

    const denied = await waiting("note two");
    expect(denied.pending).toMatchObject({ toolName: "append", arguments: { path: PROBE.path, text: "two\n" } });
    expect(await notes()).toBe("one\n");
    await root.decide(denied.pending.callId, { approved: false, reason: "not now" }, ctx);
    expect(await denied.submission.wait(ctx)).toMatchObject({
      status: "done",
      answer: { text: `I did not run append: the person denied it (reason: not now). ${PROBE.path} is as it was.` },
    });
    expect(await notes()).toBe("one\n");

    const approved = await waiting("note three");
    await root.decide(approved.pending.callId, { approved: true, argumentsHash: approved.pending.argumentsHash }, ctx);
    expect(await approved.submission.wait(ctx)).toMatchObject({ status: "done", answer: { text: 'Added "three" to notes.txt.' } });
    expect(await notes()).toBe("one\nthree\n");

    await flip(false);
    expect((await say(root, "note four")).text).toBe('Added "four" to notes.txt.');
    expect(await notes()).toBe("one\nthree\nfour\n");
  });

  it("the switch is the last switch entry; reading notes never asks", async () => {
    const entry = (on: boolean | string) => ({ kind: ASK_BEFORE_WRITING.kind, payload: { data: { on } } });
    expect(askBeforeWriting([])).toBe(false);
    expect(askBeforeWriting([entry(true)])).toBe(true);
    expect(askBeforeWriting([entry(true), { kind: "pi.user", payload: {} }, entry(false)])).toBe(false);
    expect(askBeforeWriting([entry("yes")])).toBe(false);
    const { root } = await openDemoAgent();
    await (await root.submit({ type: "write", entry: { kind: ASK_BEFORE_WRITING.kind, data: { on: true } } }, ctx)).wait(ctx);
    expect((await say(root, "read notes")).text).toBe(`There is no ${PROBE.path} yet. Add a line with "note <text>".`);
    expect(root.pendingApprovals()).toEqual([]);
  });
});

describe("ask the person (the demo's page tool)", () => {
  it("ask me calls ask_person with the question and its choices, waits for a page, and answers with the pick", async () => {
    const { root } = await openDemoAgent();
    const submission = await root.submit({ type: "input", content: ASK_PERSON.input }, ctx);
    await until(() => root.pendingPageCalls().length === 1, "the call waits for a page");
    const [call] = root.pendingPageCalls();
    expect(call).toMatchObject({
      toolName: ASK_PERSON.tool,
      status: "waiting",
      arguments: { question: ASK_PERSON.question, choices: [...ASK_PERSON.choices] },
    });
    await root.claimPageCall(call!.callId, { claimId: "test" }, ctx);
    await root.answerPageCall(call!.callId, "test", "green", ctx);
    expect(await submission.wait(ctx)).toMatchObject({ status: "done", answer: { text: "You chose green." } });
  });
});
