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
  /** With these (`leavingTurn`): the tab's intent commits and the effects it started, as in `mirroredTurn`. */
  intents?: Map<string, number>;
  effects?: Array<{ what: string; position: number }>;
}

export const toolTurn: TwoPlaceScenario<State> = {
  name: "an agent turn handed over while its tools run",
  world: () => ({ models: policyModels(), envs: memoryEnvs() }),
  open: async (place, storage, clock, lease, world: SweepWorld<State>) => {
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
    const { intents, effects } = world.state;
    const api = world.state.models.api;
    const models =
      place === "tab" && intents && effects
        ? requestsTracked(api, () => effects.push({ what: "a model request", position: intents.get("request") ?? 0 }))
        : api;
    const harness = await Harness.open(
      storage,
      {
        registry: createRegistry().install(defineExtension({ name: "sweep", tools })),
        clock,
        lease,
        models,
        env: (conversationId) => world.state.envs(conversationId),
        settings: { progress: { persistWithinMs: 0 }, retry: { maxRetries: 2, baseDelayMs: 500 } },
      },
      ctx,
    );
    if (place === "tab" && intents && !harness.readOnly) watchIntents(harness, intents);
    return harness;
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

interface MirroredState {
  models: ScriptedModels;
  envs: ReturnType<typeof memoryEnvs>;
  /** The tab's latest intent commits (decision 0032): a tool task's `execute`, a model request's `requestedAt`. */
  intents: Map<string, number>;
  /** Effects started in the tab, with the position of the commit that recorded each. */
  effects: Array<{ what: string; position: number }>;
}

/** Keeps, from the tab's log, the position of the last commit that recorded each effect's intent. */
function watchIntents(harness: Harness, intents: Map<string, number>): void {
  harness.onLog((batch) => {
    for (const task of batch.tasks) {
      const state = task.state as { status: string; checkpoint?: { phase?: string } };
      if (task.kind === "pi.tool" && state.status === "running" && state.checkpoint?.phase === "execute")
        intents.set(`tool ${task.id}`, batch.fence.position);
    }
    for (const document of batch.documents) {
      const generation = (document.value as { generation?: { requestedAt?: number } } | null)?.generation;
      if (document.key === "pi.live" && generation?.requestedAt !== undefined) intents.set("request", batch.fence.position);
    }
  });
}

/** `api` telling `started` before each model request goes out (an effect, decision 0032). */
function requestsTracked<T extends object>(api: T, started: () => void): T {
  return new Proxy(api, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver);
      if (key !== "streamSimple" || typeof value !== "function") return value;
      return (...args: unknown[]) => {
        started();
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

/**
 * The same turn (an unsafe note, a safe look, then the answer) run by a tab that mirrors every commit live and
 * never hands over (decision 0032): it finishes there with the object following, or it crashes (or is cut off)
 * and the object takes over after the lease's expiry. Every effect the tab started is recorded with the
 * position of its intent's commit.
 */
export const mirroredTurn: TwoPlaceScenario<MirroredState> = {
  name: "an agent turn in a tab that mirrors live",
  world: () => ({ models: policyModels(), envs: memoryEnvs(), intents: new Map(), effects: [] }),
  open: async (place, storage, clock, lease, world: SweepWorld<MirroredState>) => {
    const { state } = world;
    const started = (what: string, intent: string) => {
      if (place === "tab") state.effects.push({ what, position: state.intents.get(intent) ?? 0 });
    };
    const note = defineTool<{ text: string }>({
      name: "note",
      description: "Append a line to notes.txt",
      parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
      async execute({ text }, api, context) {
        started(`the unsafe tool (task ${api.taskId})`, `tool ${api.taskId}`);
        const env = await api.env<ExecutionEnv>();
        await env.append("notes.txt", `${text}\n`, context);
        return "noted";
      },
    });
    const models = requestsTracked(state.models.api, () => started("a model request", "request"));
    const harness = await Harness.open(
      storage,
      {
        registry: createRegistry().install(defineExtension({ name: "sweep", tools: [world.track(note), world.track(lookTool())] })),
        clock,
        lease,
        models,
        env: (conversationId) => state.envs(conversationId),
        settings: { progress: { persistWithinMs: 0 }, retry: { maxRetries: 2, baseDelayMs: 500 } },
      },
      ctx,
    );
    if (place === "tab" && !harness.readOnly) watchIntents(harness, state.intents);
    return harness;
  },
  start: async (harness) => {
    const root = await harness.root(ctx, { agent: { model: "faux/faux-1" } });
    await root.submit({ type: "input", content: "please note", requestId: "q1" }, ctx);
  },
  leaveWhen: () => false,
  effects: (world) => world.state.effects,
  invariants: [
    async ({ storage }) => {
      // The input is answered wherever the turn finished (a tab that crashed before its submission was pushed
      // never made one: nothing to answer).
      const [conversation] = await storage.listConversations();
      const [submission] = conversation ? await storage.listSubmissions(conversation.id) : [];
      return submission === undefined || submission.status === "done" ? undefined : `the input ended ${submission.status}`;
    },
  ],
};

/**
 * `toolTurn` in a world where the tab may stay away (decision 0101's path: the page says `lease.leaving` and its
 * worker dies before its rest and release; the object takes the lease over a grace later, at what its copy holds).
 * toolTurn's own invariant assumes the tab's conversation reached the object; here a tab that crashed before it did
 * leaves the object nothing — that stretch is the tab's fork, which the sweep's verdict counts and checks (nothing the
 * tab stored vanished unseen, no effect in it). What must hold at the object: S8, the unsafe note has at most one
 * result (the built-in checks: it ran at most once, one result per call), the input is answered if it got there, and
 * every model request the tab made is in the object's history (the verdict's "nothing with an effect lost").
 */
export const leavingTurn: TwoPlaceScenario<State> = {
  ...toolTurn,
  name: "an agent turn whose page says it is leaving and whose worker may never release",
  world: () => ({ ...toolTurn.world!(), intents: new Map(), effects: [] }),
  effects: (world) => world.state.effects ?? [],
  invariants: [
    async ({ storage }) => {
      const [conversation] = await storage.listConversations();
      if (!conversation) return undefined; // the tab's conversation never reached the object: a fork, judged by the verdict
      const entries = await storage.listEntries(conversation.id);
      const note = entries.filter((e) => e.kind === "pi.tool-result" && JSON.stringify(e.payload).includes("call_note"));
      if (note.length > 1) return `note's results: ${JSON.stringify(note)}`;
      const [submission] = await storage.listSubmissions(conversation.id);
      return submission === undefined || submission.status === "done" ? undefined : `the input ended ${submission.status}`;
    },
  ],
};
