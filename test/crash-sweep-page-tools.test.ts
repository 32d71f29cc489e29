import type { AssistantMessage } from "@earendil-works/pi-ai";
import { describe, expect, it } from "vitest";
import {
  conversationScope,
  createRegistry,
  BACKGROUND_CONTEXT as ctx,
  defineExtension,
  definePageTool,
  Harness,
  type PageCallRecord,
  type ToolResultEntryPayload,
} from "../src/index.ts";
import { type CrashScenario, type CrashSweepResult, crashSweep } from "../src/testing/index.ts";
import { answer, callTool, ScriptedModels, texts } from "./agent-support.ts";

// DESIGN §4c, S8 and decision 0028 swept at every commit boundary: waiting, claimed, answered, result.

type Transcript = { messages: Array<{ role: string }> };

interface State {
  models: ScriptedModels;
  /** Claims the page won (it ran the tool after each), per attempt; survives crashes like the person's memory. */
  pageRuns: number;
  /** Errors a claim or an answer met other than those that say another page or the end came first. */
  errors: string[];
}

const EXPECTED = new Set(["PageCallTaken", "PageCallEnded", "PageClaimLost", "HarnessClosed"]);

function pageScenario(name: string, replay: "safe" | "unsafe"): CrashScenario<State> {
  const respond = (context: Transcript): AssistantMessage =>
    context.messages.at(-1)?.role === "toolResult" ? answer("thanks") : callTool("ask_person", { question: "colour?" }, "call_ask");
  const tool = definePageTool({
    name: "ask_person",
    description: "Ask the person in the page",
    parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
    replay,
  });
  return {
    name,
    world: () => ({ models: new ScriptedModels(Array.from({ length: 50 }, () => respond as never)), pageRuns: 0, errors: [] }),
    open: (storage, clock, world) =>
      Harness.open(
        storage,
        {
          registry: createRegistry().install(defineExtension({ name: "sweep", tools: [tool] })),
          clock,
          models: world.state.models.api,
          settings: { progress: { persistWithinMs: 0 }, retry: { maxRetries: 2, baseDelayMs: 500 } },
        },
        ctx,
      ),
    start: async (harness) => {
      const root = await harness.root(ctx, { agent: { model: "faux/faux-1" } });
      await root.submit({ type: "input", content: "ask me", requestId: "q1" }, ctx);
      harness.resume();
    },
    done: (harness, world) => {
      const rootId = harness.rootConversationId;
      if (rootId !== undefined) {
        // The page: claims what waits, runs it once it holds the claim, answers. Not awaited, so a crash at a
        // commit freezes only it.
        const root = harness.conversation(rootId);
        const failed = (error: Error) => {
          if (!EXPECTED.has(error.name)) world.state.errors.push(`${error.name}: ${error.message}`);
        };
        for (const call of root.pendingPageCalls()) {
          if (call.status !== "waiting") continue;
          const claimId = `page-${world.process}:${call.attempts + 1}`;
          root.claimPageCall(call.callId, { claimId, pageId: `page-${world.process}` }, ctx).then(() => {
            world.state.pageRuns++;
            root.answerPageCall(call.callId, claimId, "green", ctx).catch(failed);
          }, failed);
        }
      }
      return harness.quiet;
    },
    invariants: [
      ({ state }) => (state.errors.length > 0 ? `a claim or an answer failed: ${state.errors.join("; ")}` : undefined),
      async ({ storage, state }) => {
        const [conversation] = await storage.listConversations();
        const record = (await storage.getDocument(conversationScope(conversation!.id), "pi.page-call:call_ask")) as
          | PageCallRecord
          | undefined;
        if (!record) return "the page tool call has no page-call record";
        const results = (await storage.listEntries(conversation!.id)).filter(
          (entry) =>
            entry.kind === "pi.tool-result" && (entry.payload as unknown as ToolResultEntryPayload).message.toolCallId === "call_ask",
        );
        if (results.length !== 1) return `the call has ${results.length} results`;
        const payload = results[0]!.payload as unknown as ToolResultEntryPayload;
        if (record.result !== undefined) return "the record still holds the result after the call ended";
        if (replay === "unsafe" && state.pageRuns > 1) return `the unsafe page tool ran ${state.pageRuns} times`;
        if (payload.code === undefined) {
          if (record.status !== "done") return `the page's result was committed but the record says ${record.status}`;
          if (texts(payload.message).join("") !== "green") return `the result is not the page's answer: ${JSON.stringify(payload.message)}`;
          if (state.pageRuns < 1) return "a page result was committed without a page having claimed the call";
          return undefined;
        }
        if (replay === "safe") return `a safe page tool ended ${payload.code} instead of running again`;
        if (payload.code !== "interrupted" || record.status !== "interrupted")
          return `the call ended ${payload.code} with its record ${record.status}`;
        // Interrupted: a claim was committed (the page may not have heard it won, if the crash came first).
      },
    ],
  };
}

function expectSwept(result: CrashSweepResult, label: string) {
  expect(result.single).toBe(2 * result.commits - 1);
  expect(result.double).toBeGreaterThan(0);
  console.log(
    `crashSweep ${label}: ${result.commits} commits, ${result.worlds} crash worlds (${result.single} single, ${result.double} double)`,
  );
}

describe("crashSweep: a page tool turn at every commit boundary (decision 0028)", { timeout: 300_000 }, () => {
  it("§4c S8: an unsafe page tool (waiting, claimed, answered, result): one claim runs it, or the model is told it was interrupted", async () => {
    expectSwept(await crashSweep(pageScenario("unsafe", "unsafe"), { double: { sample: 40, seed: 28 } }), "page tool unsafe");
  });

  it("§4c S8: a safe page tool: every crash world ends with the page's answer, run again after a cut-off claim", async () => {
    expectSwept(await crashSweep(pageScenario("safe", "safe"), { double: { sample: 40, seed: 29 } }), "page tool safe");
  });

  it("§4c S8 on SQLite: the unsafe page tool turn, single crashes and a sample of double ones", async () => {
    expectSwept(
      await crashSweep(pageScenario("unsafe on SQLite", "unsafe"), { storage: "sqlite", double: { sample: 15, seed: 30 } }),
      "page tool unsafe on SQLite",
    );
  });
});
