import type { AssistantMessage } from "@earendil-works/pi-ai";
import { waitFor } from "../src/base/context.ts";
import {
  createRegistry,
  BACKGROUND_CONTEXT as ctx,
  defineExtension,
  defineTool,
  type ExecutionEnv,
  Harness,
  memoryEnvs,
} from "../src/index.ts";
import type { SweepWorld } from "../src/testing/index.ts";
import type { TwoPlaceScenario } from "../src/testing/two-places/sweep.ts";
import { answer, callTools, lookTool, ScriptedModels } from "./agent-support.ts";

/**
 * An agent turn with an unsafe tool (note) and a safe one (look) that starts in the tab, which closes (hands over)
 * while the unsafe tool runs there; the object finishes the turn.
 */
type Transcript = { messages: Array<{ role: string }> };

function policyModels(): ScriptedModels {
  const respond = (context: Transcript): AssistantMessage => {
    if (context.messages.at(-1)?.role === "toolResult") return answer("done");
    return callTools([
      ["note", { text: "line" }, "call_note"],
      ["look", {}, "call_look"],
    ]);
  };
  return new ScriptedModels(Array.from({ length: 100 }, () => respond as never));
}

interface State {
  models: ScriptedModels;
  envs: ReturnType<typeof memoryEnvs>;
  /** Set by the unsafe tool when it starts in the tab: the tab closes while it runs. */
  leave?: boolean;
}

export const toolTurn: TwoPlaceScenario<State> = {
  name: "an agent turn handed over while its tools run",
  world: () => ({ models: policyModels(), envs: memoryEnvs() }),
  open: (place, storage, clock, lease, world: SweepWorld<State>) => {
    const tools = [
      world.track(
        defineTool<{ text: string }>({
          name: "note",
          description: "Append a line to notes.txt",
          parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
          async execute({ text }, api, context) {
            if (place === "tab") {
              world.state.leave = true; // the tab closes now: this run is cut off by the hand-over
              await waitFor(new Promise<never>(() => {}), context);
            }
            const env = await api.env<ExecutionEnv>();
            await env.append("notes.txt", `${text}\n`, context);
            return "noted";
          },
        }),
      ),
      world.track(lookTool()),
    ];
    return Harness.open(
      storage,
      {
        registry: createRegistry().install(defineExtension({ name: "sweep", tools })),
        clock,
        lease,
        models: world.state.models.api,
        env: (conversationId) => world.state.envs(conversationId),
        settings: { progress: { persistWithinMs: 0 }, retry: { maxRetries: 2, baseDelayMs: 500 } },
      },
      ctx,
    );
  },
  start: async (harness) => {
    const root = await harness.root(ctx, { agent: { model: "faux/faux-1" } });
    await root.submit({ type: "input", content: "please note", requestId: "q1" }, ctx);
  },
  // Leave while the unsafe tool runs (or when there is nothing left to do here).
  leaveWhen: (harness, world) => world.state.leave === true || harness.quiet,
  invariants: [
    async ({ storage }) => {
      // S8: the unsafe call was cut off in the tab and never rerun: its one result is the interrupted error; the
      // turn was answered by the object.
      const [conversation] = await storage.listConversations();
      const entries = await storage.listEntries(conversation!.id);
      const note = entries.filter((e) => e.kind === "pi.tool-result" && JSON.stringify(e.payload).includes("call_note"));
      if (note.length !== 1 || !JSON.stringify(note[0]!.payload).includes("was interrupted"))
        return `note's results: ${JSON.stringify(note)}`;
      const [submission] = await storage.listSubmissions(conversation!.id);
      if (submission?.status !== "done") return `the input ended ${submission?.status}`;
      return undefined;
    },
  ],
};
