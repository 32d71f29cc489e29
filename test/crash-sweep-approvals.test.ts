import type { AssistantMessage } from "@earendil-works/pi-ai";
import { describe, expect, it } from "vitest";
import {
  type ApprovalRecord,
  conversationScope,
  createRegistry,
  BACKGROUND_CONTEXT as ctx,
  defineExtension,
  defineTool,
  type ExecutionEnv,
  Harness,
  memoryEnvs,
  type ToolResultEntryPayload,
} from "../src/index.ts";
import { type CrashScenario, type CrashSweepResult, crashSweep, type SweepWorld } from "../src/testing/index.ts";
import { answer, callTools, lookTool, ScriptedModels } from "./agent-support.ts";

// DESIGN §4c and S8 swept at every commit boundary: awaiting, decided, started, result.

type Transcript = { messages: Array<{ role: string }> };

function policyModels(): ScriptedModels {
  const respond = (context: Transcript): AssistantMessage =>
    context.messages.at(-1)?.role === "toolResult"
      ? answer("done")
      : callTools([
          ["note", { text: "line 1" }, "call_note"],
          ["look", {}, "call_look"],
        ]);
  return new ScriptedModels(Array.from({ length: 50 }, () => respond as never));
}

interface State {
  models: ScriptedModels;
  envs: ReturnType<typeof memoryEnvs>;
  /** Errors a decision met other than the one that says it lost the race. */
  errors: string[];
}

function approvalScenario(name: string, person: { approved: boolean } | "never", expiresAfterMs?: number): CrashScenario<State> {
  const tools = (world: SweepWorld<State>) => [
    world.track(
      defineTool<{ text: string }>({
        name: "note",
        description: "Append a line to notes.txt",
        parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
        approval: "always",
        ...(expiresAfterMs !== undefined ? { approvalExpiresAfterMs: expiresAfterMs } : {}),
        async execute({ text }, api, context) {
          const env = await api.env<ExecutionEnv>();
          await env.append("notes.txt", `${text}\n`, context);
          return "noted";
        },
      }),
    ),
    world.track(lookTool()),
  ];
  return {
    name,
    world: () => ({ models: policyModels(), envs: memoryEnvs(), errors: [] }),
    open: (storage, clock, world) =>
      Harness.open(
        storage,
        {
          registry: createRegistry().install(defineExtension({ name: "sweep", tools: tools(world) })),
          clock,
          models: world.state.models.api,
          env: (conversationId) => world.state.envs(conversationId),
          settings: { progress: { persistWithinMs: 0 }, retry: { maxRetries: 2, baseDelayMs: 500 } },
        },
        ctx,
      ),
    start: async (harness) => {
      const root = await harness.root(ctx, { agent: { model: "faux/faux-1" } });
      await root.submit({ type: "input", content: "please note", requestId: "q1" }, ctx);
      harness.resume();
    },
    done: (harness, world) => {
      const rootId = harness.rootConversationId;
      if (rootId !== undefined && person !== "never") {
        // The person answers what the card shows; not awaited, so a crash at the decision's commit freezes only it.
        const root = harness.conversation(rootId);
        for (const pending of root.pendingApprovals()) {
          root.decide(pending.callId, { ...person, argumentsHash: pending.argumentsHash }, ctx).catch((error: Error) => {
            if (error.name !== "AlreadyDecided" && error.name !== "HarnessClosed")
              world.state.errors.push(`${error.name}: ${error.message}`);
          });
        }
      }
      return harness.quiet;
    },
    invariants: [
      ({ state }) => (state.errors.length > 0 ? `a decision failed: ${state.errors.join("; ")}` : undefined),
      async ({ storage, toolRuns }) => {
        const [conversation] = await storage.listConversations();
        const record = (await storage.getDocument(conversationScope(conversation!.id), "pi.approval:call_note")) as
          | ApprovalRecord
          | undefined;
        if (!record) return "the call that needed a person has no approval record";
        const expected = person === "never" ? "denied" : person.approved ? "approved" : "denied";
        if (record.status !== expected) return `the approval ended ${record.status}, not ${expected}`;
        const ran = [...toolRuns.entries()].filter(([key]) => key.startsWith("note:")).reduce((sum, [, runs]) => sum + runs.runs, 0);
        if (record.status !== "approved" && ran > 0) return `the tool ran ${ran} time(s) without an approval`;
        const results = (await storage.listEntries(conversation!.id)).filter(
          (entry) =>
            entry.kind === "pi.tool-result" && (entry.payload as unknown as ToolResultEntryPayload).message.toolCallId === "call_note",
        );
        const payload = results[0]?.payload as unknown as ToolResultEntryPayload | undefined;
        if (payload?.approval?.approved !== (record.status === "approved"))
          return `the result says ${JSON.stringify(payload?.approval)} but the record says ${record.status}`;
        if (person === "never" && payload.approval.reason !== "expired") return "an expired call was not denied as expired";
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

describe("crashSweep: a person in the loop at every commit boundary", { timeout: 300_000 }, () => {
  it("§4c S8: an approval turn (awaiting, decided, started, result): the tool runs at most once, only once approved", async () => {
    expectSwept(await crashSweep(approvalScenario("approved", { approved: true }), { double: { sample: 40, seed: 23 } }), "approved");
  });

  it("§4c S8: a denied call: the tool never runs, the model gets the denial", async () => {
    expectSwept(await crashSweep(approvalScenario("denied", { approved: false }), { double: { sample: 20, seed: 24 } }), "denied");
  });

  it("§4c: an expiring call nobody decides: denied as expired in every crash world", async () => {
    expectSwept(await crashSweep(approvalScenario("expired", "never", 5_000), { double: { sample: 20, seed: 25 } }), "expired");
  });

  it("§4c S8 on SQLite: the approval turn, single crashes and a sample of double ones", async () => {
    expectSwept(
      await crashSweep(approvalScenario("approved (sqlite)", { approved: true }), { storage: "sqlite", double: { sample: 10, seed: 26 } }),
      "approved on SQLite",
    );
  });
});
