import { describe, expect, it } from "vitest";
import { HostClient } from "../src/host/client.ts";
import { hostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import { type ClientMessage, type HostMessage, messageEndpoint, serveMessages } from "../src/host/messages.ts";
import type { PageToolImplementation } from "../src/host/page-tools.ts";
import {
  createRegistry,
  defineExtension,
  definePageTool,
  InvalidArguments,
  NotFound,
  type Storage,
  type ToolResultEntryPayload,
} from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { answer, callTool, ScriptedModels, settle, texts, until } from "./agent-support.ts";
import { sqliteMemoryBackend } from "./support.ts";

// DESIGN §4c, decision 0028: page tools through the real host and protocol, with page-side clients over a
// message transport (as a follower tab or a socket reaches its host).

const ARGS = { question: "Which colour?" };

function serve(replay: "safe" | "unsafe", models: ScriptedModels, storage?: Storage) {
  const tool = definePageTool({
    name: "ask_person",
    description: "Ask the person",
    parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
    replay,
  });
  return createHost({
    database: "test",
    openStorage: async () => storage ?? (await sqliteMemoryBackend.create()),
    harness: {
      registry: createRegistry().install(defineExtension({ name: "page", tools: [tool] })),
      clock: createManualClock(1_000),
      models: models.api,
      resume: true,
    },
    now: () => 0,
  });
}

/** A page connected to the host by messages; `close()` drops its connection (its tab closed). */
function page(served: ReturnType<typeof serve>, pageId: string) {
  let toPage: (message: HostMessage) => void = () => {};
  const connection = serveMessages(hostEndpoint(served.service), (message) => queueMicrotask(() => toPage(structuredClone(message))));
  const side = messageEndpoint((message: ClientMessage) => queueMicrotask(() => connection.receive(structuredClone(message))));
  toPage = side.receive;
  return { client: new HostClient(side.endpoint, pageId), close: () => connection.close() };
}

async function toolResults(client: HostClient, conversationId: number): Promise<ToolResultEntryPayload[]> {
  const view = await client.openConversation(conversationId);
  const results = view.state.entries.filter((entry) => entry.kind === "pi.tool-result");
  view.close();
  return results.map((entry) => entry.payload as unknown as ToolResultEntryPayload);
}

async function turn(replay: "safe" | "unsafe") {
  const models = new ScriptedModels([callTool("ask_person", ARGS, "call_1"), answer("thanks")]);
  const served = serve(replay, models);
  const a = page(served, "tab-a");
  const b = page(served, "tab-b");
  await served.ready;
  const conversationId = await a.client.rootConversation({ model: "faux/faux-1" });
  return { models, served, a, b, conversationId };
}

describe("page tools through the host (DESIGN §4c, decision 0028)", () => {
  it("§4c: two pages provide the tool; exactly one claims and runs it, its result reaches the model once", async () => {
    const { a, b, conversationId, models } = await turn("unsafe");
    const runs: string[] = [];
    const impl =
      (who: string): PageToolImplementation =>
      async ({ question }) => {
        runs.push(who);
        return `${who} answered ${String(question)}: green`;
      };
    const stopA = await a.client.providePageTools(conversationId, { ask_person: impl("a") });
    const stopB = await b.client.providePageTools(conversationId, { ask_person: impl("b") });
    const submission = await a.client.submit(conversationId, { type: "input", content: "ask me" });
    expect(await a.client.waitForSubmission(submission)).toMatchObject({ status: "done" });
    expect(runs).toHaveLength(1);
    const results = await toolResults(a.client, conversationId);
    expect(results).toHaveLength(1);
    expect(texts(results[0]!.message)).toEqual([`${runs[0]} answered Which colour?: green`]);
    expect(JSON.stringify(models.requests[1])).toContain("green");
    stopA();
    stopB();
  });

  it("§4c: a page that implements only other tools never claims the call; the call waits for one that provides it", async () => {
    const { a, b, conversationId } = await turn("unsafe");
    const other = { count: 0 };
    await a.client.providePageTools(conversationId, { pick_file: () => `${other.count++}` });
    const submission = await a.client.submit(conversationId, { type: "input", content: "ask me" });
    await until(async () => (await a.client.inspect()).pageCalls.length === 1, "the call waits");
    await settle();
    expect((await a.client.inspect()).pageCalls).toMatchObject([{ callId: "call_1", status: "waiting" }]);
    await b.client.providePageTools(conversationId, { ask_person: () => "green" });
    expect(await a.client.waitForSubmission(submission)).toMatchObject({ status: "done" });
    expect(other.count).toBe(0);
  });

  it("S8 §4c: the running page's tab closes (its connection drops): unsafe, the model gets an interrupted result; the other page never runs it", async () => {
    const { a, b, conversationId } = await turn("unsafe");
    let started = false;
    await a.client.providePageTools(conversationId, { ask_person: () => new Promise(() => void (started = true)) });
    const submission = await b.client.submit(conversationId, { type: "input", content: "ask me" });
    await until(() => started, "page a runs the tool");
    const runsB = { count: 0 };
    await b.client.providePageTools(conversationId, { ask_person: () => `${runsB.count++}` });
    a.close();
    expect(await b.client.waitForSubmission(submission)).toMatchObject({ status: "done" });
    const [result] = await toolResults(b.client, conversationId);
    expect(result?.code).toBe("interrupted");
    expect(runsB.count).toBe(0);
  });

  it("S8 §4c: the running page's tab closes: safe, the next page that provides it runs it again (attempt 2)", async () => {
    const { a, b, conversationId } = await turn("safe");
    let started = false;
    await a.client.providePageTools(conversationId, { ask_person: () => new Promise(() => void (started = true)) });
    const submission = await b.client.submit(conversationId, { type: "input", content: "ask me" });
    await until(() => started, "page a runs the tool");
    const attempts: number[] = [];
    await b.client.providePageTools(conversationId, {
      ask_person: (_args, call) => {
        attempts.push(call.attempt);
        return "green";
      },
    });
    a.close();
    expect(await b.client.waitForSubmission(submission)).toMatchObject({ status: "done" });
    expect(attempts).toEqual([2]);
    expect(texts((await toolResults(b.client, conversationId))[0]!.message)).toEqual(["green"]);
  });

  it("R4 §4c: the door refuses a malformed result (InvalidArguments) and another conversation's call (NotFound); nothing changes", async () => {
    const { a, conversationId } = await turn("unsafe");
    await a.client.submit(conversationId, { type: "input", content: "ask me" });
    await until(async () => (await a.client.inspect()).pageCalls.length === 1, "the call waits");
    const other = await a.client.createConversation();
    await expect(a.client.claimPageCall(other, "call_1", { claimId: "x" })).rejects.toBeInstanceOf(NotFound);
    await a.client.claimPageCall(conversationId, "call_1", { claimId: "x", pageId: "tab-a" });
    await expect(a.client.answerPageCall(conversationId, "call_1", "x", { content: 7 } as never)).rejects.toBeInstanceOf(InvalidArguments);
    await expect(a.client.answerPageCall(conversationId, "call_1", "x", { text: "hi" } as never)).rejects.toBeInstanceOf(InvalidArguments);
    expect((await a.client.inspect()).pageCalls).toMatchObject([{ status: "claimed", attempts: 1 }]);
  });
});
