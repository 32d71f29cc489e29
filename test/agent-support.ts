import {
  type Api,
  type AssistantMessage,
  type AssistantMessageEventStream,
  createModels,
  type FauxResponseStep,
  fauxAssistantMessage,
  fauxProvider,
  fauxText,
  fauxToolCall,
  type Message,
  type Model,
  type Context as ModelContext,
  type Models,
} from "@earendil-works/pi-ai";
import type { LeaseOptions } from "../src/harness.ts";
import {
  type AgentHooks,
  type AnyTool,
  type Conversation,
  type CrashPointHandler,
  createRegistry,
  defineExtension,
  defineTool,
  type EntryRecord,
  type ExecutionEnv,
  Harness,
  type LiveView,
  memoryEnvs,
  type Report,
  type Settings,
  type Storage,
  type TaskRecord,
} from "../src/index.ts";
import { createManualClock, type ManualClock } from "../src/testing/clock.ts";
import { partialAnswer } from "./partial-answer.ts";
import { ctx } from "./support.ts";

export { fauxAssistantMessage, fauxText, fauxToolCall };

/** A step the scripted model takes for one request. */
export type Step = FauxResponseStep | { hang: string };

/**
 * pi-ai models for tests: the faux provider, plus steps that stream a partial answer and then hang until the
 * request is aborted (a model request "in flight" at a crash). Every request's messages are recorded.
 */
export class ScriptedModels {
  readonly faux = fauxProvider({ api: "faux", provider: "faux" });
  readonly models = createModels();
  readonly requests: Message[][] = [];
  /** Requests that reached a `hang` step (and are still streaming). */
  hanging = 0;
  readonly #steps: Step[] = [];

  constructor(steps: Step[] = []) {
    this.models.setProvider(this.faux.provider);
    this.script(...steps);
  }

  script(...steps: Step[]): this {
    this.#steps.push(...steps);
    return this;
  }

  get pending(): number {
    return this.#steps.length;
  }

  /** The object to pass as `HarnessOptions.models`. */
  get api(): Models {
    const scripted = this;
    return new Proxy(this.models, {
      get(target, key, receiver) {
        if (key === "streamSimple")
          return (model: Model<Api>, context: ModelContext, options?: { signal?: AbortSignal }) =>
            scripted.#stream(model, context, options);
        if (key === "completeSimple") {
          return (model: Model<Api>, context: ModelContext, options?: { signal?: AbortSignal }) =>
            scripted.#stream(model, context, options).result();
        }
        const value = Reflect.get(target, key, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  }

  #stream(model: Model<Api>, context: ModelContext, options?: { signal?: AbortSignal }): AssistantMessageEventStream {
    this.requests.push(
      structuredClone(
        context.systemPrompt ? [{ role: "system", content: context.systemPrompt, timestamp: 0 }, ...context.messages] : context.messages,
      ),
    );
    const step = this.#steps.shift();
    if (step && typeof step === "object" && "hang" in step) return this.#hang(model, step.hang, options?.signal);
    this.faux.setResponses(step === undefined ? [] : [step]);
    return this.models.streamSimple(model, context, options);
  }

  #hang(model: Model<Api>, text: string, signal: AbortSignal | undefined): AssistantMessageEventStream {
    this.hanging++;
    return partialAnswer(model, text, (stream, partial) => {
      const abort = () => {
        this.hanging--;
        const aborted: AssistantMessage = { ...partial, stopReason: "aborted", errorMessage: "Request was aborted" };
        stream.push({ type: "error", reason: "aborted", error: aborted });
        stream.end(aborted);
      };
      if (signal?.aborted) abort();
      else signal?.addEventListener("abort", abort, { once: true });
    });
  }
}

export const answer = (text: string) => fauxAssistantMessage(fauxText(text));
export const callTool = (name: string, args: Record<string, unknown>, id: string) =>
  fauxAssistantMessage([fauxToolCall(name, args as never, { id })], { stopReason: "toolUse" });
export const callTools = (calls: Array<[name: string, args: Record<string, unknown>, id: string]>) =>
  fauxAssistantMessage(
    calls.map(([name, args, id]) => fauxToolCall(name, args as never, { id })),
    { stopReason: "toolUse" },
  );

export interface AgentWorld {
  /** One `MemoryEnv` per conversation; it survives the simulated crash like real files. */
  envs: ReturnType<typeof memoryEnvs>;
}

export function createWorld(): AgentWorld {
  return { envs: memoryEnvs() };
}

export interface AgentOpened {
  harness: Harness;
  clock: ManualClock;
  reports: Report[];
  root: Conversation;
  storage: Storage;
}

/** Opens a harness with the agent configured on faux/faux-1 and the given tools and hooks installed. */
export async function openAgent(
  storage: Storage,
  options: {
    models: ScriptedModels;
    world: AgentWorld;
    tools?: AnyTool[];
    hooks?: AgentHooks;
    settings?: Settings;
    clock?: ManualClock;
    instructions?: string;
    crashPoint?: CrashPointHandler;
    connectedPages?: string[];
    lease?: LeaseOptions;
  },
): Promise<AgentOpened> {
  const clock = options.clock ?? createManualClock(1_000);
  const reports: Report[] = [];
  const registry = createRegistry();
  if (options.tools || options.hooks)
    registry.install(defineExtension({ name: "test", tools: options.tools ?? [], ...(options.hooks ? { hooks: options.hooks } : {}) }));
  const harness = await Harness.open(
    storage,
    {
      registry,
      models: options.models.api,
      settings: options.settings,
      clock,
      env: (conversationId) => options.world.envs(conversationId),
      onReport: (report) => reports.push(report),
      ...(options.crashPoint ? { crashPoint: options.crashPoint } : {}),
      ...(options.connectedPages ? { connectedPages: options.connectedPages } : {}),
      ...(options.lease ? { lease: options.lease } : {}),
    },
    ctx,
  );
  const root = await harness.root(ctx, {
    agent: { model: "faux/faux-1", ...(options.instructions ? { instructions: options.instructions } : {}) },
  });
  return { harness, clock, reports, root, storage };
}

/** Lets every queued promise run (commits, passes, phases) without moving the clock. */
export async function settle(rounds = 40): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setTimeout(resolve, 0));
}

/** Flushes until `done()` holds, without moving the clock. */
export async function until(done: () => boolean | Promise<boolean>, what = "condition", limit = 400): Promise<void> {
  for (let i = 0; i < limit; i++) {
    if (await done()) return;
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  throw new Error(`until: ${what} never held`);
}

/** The committed `pi.live` of a conversation, tool slots merged with their progress. */
export async function live(conversation: Conversation): Promise<LiveView> {
  return (await conversation.view(ctx)).live;
}

export async function entriesOf(conversation: Conversation): Promise<EntryRecord[]> {
  return conversation.entries(ctx);
}

export function kinds(entries: readonly EntryRecord[]): string[] {
  return entries.map((entry) => entry.kind);
}

/** Every task of the storage by kind, in id order. */
export async function tasksOf(storage: Storage, kind: string): Promise<TaskRecord[]> {
  return (await storage.listTasks()).filter((task) => task.kind === kind).sort((a, b) => a.id - b.id);
}

/** Text items of a message's content. */
export function texts(message: { content: unknown }): string[] {
  const content = message.content;
  if (typeof content === "string") return [content];
  return (content as Array<{ type: string; text?: string }>).map((item) => (item.type === "text" ? item.text! : `[${item.type}]`));
}

/** A promise that resolves when the context's signal aborts (never, for an abandoned harness). */
export function untilAborted(signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) resolve();
    else signal?.addEventListener("abort", () => resolve(), { once: true });
  });
}

export const INTERRUPTED = (name: string) => `<harness>\n[error] Tool ${name} was interrupted and may have partially run\n</harness>`;

/** The sweeps' safe reading tool: `look` answers notes.txt of the conversation's env, or "(empty)". */
export function lookTool(): AnyTool {
  return defineTool({
    name: "look",
    description: "Read notes.txt",
    parameters: { type: "object", properties: {} },
    replay: "safe",
    async execute(_args, api, context) {
      const env = await api.env<ExecutionEnv>();
      return env.read("notes.txt", context).catch(() => "(empty)");
    },
  });
}
