import type { AssistantMessage } from "@earendil-works/pi-ai";
import { describe, expect, it } from "vitest";
import {
  createRegistry,
  BACKGROUND_CONTEXT as ctx,
  defineExtension,
  defineTool,
  type ExecutionEnv,
  Harness,
  memoryEnvs,
  type Settings,
} from "../src/index.ts";
import { type CrashScenario, type CrashSweepResult, crashSweep, type SweepWorld } from "../src/testing/index.ts";
import { answer, callTools, lookTool, ScriptedModels } from "./agent-support.ts";

// The agent swept at every commit boundary (issue 9): single crashes everywhere, double crashes sampled.

type Transcript = { systemPrompt?: string; messages: Array<{ role: string; content: unknown }> };

/**
 * The model as a policy, not a script, so a resent request gets the same kind of answer: a user turn gets
 * the tool calls, a turn after tool results gets the answer, a summarizer request gets a summary.
 */
function policyModels(): ScriptedModels {
  const respond = (context: Transcript): AssistantMessage => {
    if (context.systemPrompt?.includes("You summarize conversations")) return answer("They asked twice; notes were written.");
    const users = context.messages.filter((m) => m.role === "user").length;
    const last = context.messages.at(-1);
    if (last?.role === "toolResult") return answer(`done ${users}`);
    return callTools([
      ["note", { text: `line ${users}` }, `u${users}_note`],
      ["look", {}, `u${users}_look`],
    ]);
  };
  return new ScriptedModels(Array.from({ length: 200 }, () => respond as never));
}

interface AgentState {
  models: ScriptedModels;
  envs: ReturnType<typeof memoryEnvs>;
  aborted?: boolean;
}

function agentScenario(
  name: string,
  options: {
    settings?: Settings;
    inputs?: Array<{ requestId: string; whenBusy?: "followUp" | "steer" }>;
    compact?: boolean;
    abortWhen?: (view: { tools: boolean; requested: boolean; entries: number }) => boolean;
  },
): CrashScenario<AgentState> {
  const tools = (world: SweepWorld<AgentState>) => [
    world.track(
      defineTool<{ text: string }>({
        name: "note",
        description: "Append a line to notes.txt",
        parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
        async execute({ text }, api, context) {
          const env = await api.env<ExecutionEnv>();
          await env.append("notes.txt", `${text}\n`, context);
          return "noted";
        },
      }),
    ),
    world.track(lookTool()),
  ];
  const inputs = options.inputs ?? [{ requestId: "q1" }];
  return {
    name,
    world: () => ({ models: policyModels(), envs: memoryEnvs() }),
    open: (storage, clock, world) => {
      const registry = createRegistry().install(defineExtension({ name: "sweep", tools: tools(world) }));
      return Harness.open(
        storage,
        {
          registry,
          clock,
          models: world.state.models.api,
          env: (conversationId) => world.state.envs(conversationId),
          settings: { progress: { persistWithinMs: 0 }, retry: { maxRetries: 2, baseDelayMs: 500 }, ...options.settings },
        },
        ctx,
      );
    },
    start: async (harness) => {
      const root = await harness.root(ctx, { agent: { model: "faux/faux-1" } });
      for (const input of inputs) {
        await root.submit(
          {
            type: "input",
            content: `please note (${input.requestId})`,
            requestId: input.requestId,
            ...(input.whenBusy ? { whenBusy: input.whenBusy } : {}),
          },
          ctx,
        );
      }
      if (options.compact && !(await harness.storage.listTasks()).some((task) => task.kind === "pi.compaction"))
        await root.compact({}, ctx);
      harness.resume();
    },
    done: async (harness, world) => {
      if (options.abortWhen && !world.state.aborted && harness.rootConversationId !== undefined) {
        const root = harness.conversation(harness.rootConversationId);
        const live = (await root.view(ctx)).live as { tools?: unknown[]; generation?: { requestedAt?: number } };
        const entries = (await root.entries(ctx)).length;
        if (options.abortWhen({ tools: (live.tools?.length ?? 0) > 0, requested: live.generation?.requestedAt !== undefined, entries })) {
          world.state.aborted = true;
          await root.abort(ctx);
        }
      }
      return harness.quiet;
    },
    invariants: [
      async ({ storage }) => {
        // Every input is settled, and an answered one has its answer in the transcript.
        for (const conversation of await storage.listConversations()) {
          for (const submission of await storage.listSubmissions(conversation.id)) {
            if (submission.status !== "done" && submission.status !== "unanswered")
              return `submission ${submission.id} ended ${submission.status}`;
          }
        }
      },
    ],
  };
}

const SAMPLE = { sample: 60, seed: 9 };

function expectSwept(result: CrashSweepResult, label: string) {
  expect(result.single).toBe(2 * result.commits - 1);
  expect(result.double).toBeGreaterThan(0);
  console.log(
    `crashSweep ${label}: ${result.commits} commits, ${result.worlds} crash worlds (${result.single} single, ${result.double} double)`,
  );
}

describe("crashSweep: the agent at every commit boundary", { timeout: 300_000 }, () => {
  it("S8/S9: a turn with a safe and an unsafe tool, parallel", async () => {
    expectSwept(await crashSweep(agentScenario("parallel tools", {}), { double: SAMPLE }), "parallel tools");
  });

  it("S8/S9: a turn with a safe and an unsafe tool, sequential", async () => {
    expectSwept(
      await crashSweep(agentScenario("sequential tools", { settings: { toolExecution: "sequential" } }), { double: SAMPLE }),
      "sequential tools",
    );
  });

  it("S9: a busy conversation: a steer and a follow-up while the first input is answered", async () => {
    const scenario = agentScenario("busy", {
      inputs: [{ requestId: "q1" }, { requestId: "s1", whenBusy: "steer" }, { requestId: "f1", whenBusy: "followUp" }],
    });
    expectSwept(await crashSweep(scenario, { double: SAMPLE }), "busy conversation");
  });

  it("S10: compaction after two answered inputs", async () => {
    const scenario = agentScenario("compaction", { inputs: [{ requestId: "q1" }, { requestId: "q2" }], compact: true });
    expectSwept(await crashSweep(scenario, { double: SAMPLE }), "compaction");
  });

  for (const [moment, when] of [
    ["while the request is in flight", (v: { requested: boolean }) => v.requested],
    ["while the tools run", (v: { tools: boolean }) => v.tools],
    ["after the answer began to be written", (v: { entries: number }) => v.entries >= 4],
  ] as const) {
    it(`S8/S9: abort ${moment}`, async () => {
      const scenario = agentScenario(`abort ${moment}`, { abortWhen: when as (v: unknown) => boolean });
      expectSwept(await crashSweep(scenario, { double: { sample: 20, seed: 3 } }), `abort ${moment}`);
    });
  }

  it("S8/S9 on SQLite: the parallel turn, single crashes and a sample of double ones", async () => {
    expectSwept(
      await crashSweep(agentScenario("parallel tools (sqlite)", {}), { storage: "sqlite", double: { sample: 15, seed: 5 } }),
      "parallel tools on SQLite",
    );
  });
});
