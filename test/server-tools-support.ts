import { type LeaseBook, type LeaseRecord, memoryArbiter } from "../src/follow/arbiter.ts";
import { type ServerAnswerMessage, ServerCallClient, type ServerCallMessage, serveServerCall } from "../src/follow/server-call-client.ts";
import { memoryServerCallStore, ServerCalls } from "../src/follow/server-calls.ts";
import {
  type Clock,
  type Context,
  type Conversation,
  createRegistry,
  defineExtension,
  defineTool,
  Harness,
  type Report,
  type Storage,
} from "../src/index.ts";
import { createManualClock, type ManualClock } from "../src/testing/clock.ts";
import { Link, type LinkAction } from "../src/testing/two-places/link.ts";
import { answer, callTools, ScriptedModels } from "./agent-support.ts";
import { ctx, flush } from "./support.ts";

/**
 * Issue 27 item 5 (decision 0036) in memory: a tab that holds the lease and a server (the object's `ServerCalls`,
 * its store and its lease book) joined by a `Link` that loses, duplicates and reorders. The tool `charge` is a server
 * tool: each place has its own implementation, and `runs` records where each call id ran.
 */

export type Step = { pick: number; action: LinkAction };

export interface TabProcess {
  harness: Harness;
  client: ServerCallClient;
  storage: Storage;
  reports: Report[];
  /** The tab dies here: its timers never fire again, its sends are dropped, the link's messages for it are lost. */
  kill(): void;
}

export interface TabOptions {
  lease?: boolean;
  serverCalls?: boolean;
  /** The lease's acknowledgement before effects (decision 0032). */
  confirm?: (position: number, context: Context) => Promise<void>;
}

export interface ServerWorld {
  clock: ManualClock;
  arbiter: LeaseBook;
  link: Link<ServerCallMessage | ServerAnswerMessage>;
  calls: ServerCalls;
  store: ReturnType<typeof memoryServerCallStore>;
  /** `place:callId` for every run of `charge`, in order. */
  runs: string[];
  /** While set, the server's `charge` waits for it before it answers. */
  gate: { wait?: Promise<void>; open?: () => void };
  openTab(storage: Storage, options?: TabOptions): Promise<TabProcess>;
  /** The object crashes and starts again at once: its store is what it kept; what it ran is cut off. */
  restartObject(): void;
}

/** The model asks for the given server calls in one turn, then answers "done". */
export function chargingModels(callIds: readonly string[]): ScriptedModels {
  return new ScriptedModels([callTools(callIds.map((id, index) => ["charge", { amount: index + 5 }, id])), answer("done")]);
}

/** `slow`: the run takes 50 ms on `clock` (the place's: a dead place's run never ends). */
export function chargeTool(place: string, world: Pick<ServerWorld, "runs" | "gate">, slow?: Clock) {
  return defineTool<{ amount: number }>({
    name: "charge",
    description: "Charge the card on file (the server holds its key)",
    parameters: { type: "object", properties: { amount: { type: "number" } }, required: ["amount"] },
    runsOn: "server",
    async execute({ amount }, api) {
      world.runs.push(`${place}:${api.callId}`);
      api.output(`charging ${amount}\n`);
      await world.gate.wait;
      if (slow) await new Promise<void>((resolve) => slow.setTimer(1_000, resolve));
      return `charged ${amount}`;
    },
  });
}

export function closeGate(world: Pick<ServerWorld, "gate">): void {
  world.gate.wait = new Promise((resolve) => {
    world.gate.open = () => {
      world.gate.wait = undefined;
      resolve();
    };
  });
}

/** `models` is the one model every tab incarnation asks (a reopened tab goes on with the same script). */
/** `lease`: the lease record the object checks asks against (default: the arbiter's, which the tab's lease uses). */
export function serverWorld(
  models: ScriptedModels,
  options: { slow?: boolean; lease?: { readonly record: LeaseRecord } } = {},
): ServerWorld {
  const clock = createManualClock(1_000);
  const arbiter = memoryArbiter({ clock, ttlMs: 5_000 });
  const link = new Link<ServerCallMessage | ServerAnswerMessage>();
  const store = memoryServerCallStore();
  const world = { runs: [] as string[], gate: {} as ServerWorld["gate"] };
  let object: { calls: ServerCalls; kill(): void };
  const startObject = () => {
    let alive = true;
    const objectClock: Clock = { now: () => clock.now(), setTimer: (delayMs, fire) => clock.setTimer(delayMs, () => alive && fire()) };
    const objectTool = chargeTool("object", world, options.slow ? objectClock : undefined);
    // What a dead incarnation would still write or send is lost with it.
    const liveStore = { get: store.get, put: (call: Parameters<typeof store.put>[0]) => alive && store.put(call) };
    const calls = new ServerCalls({
      lease: options.lease ?? arbiter,
      store: liveStore,
      clock: objectClock,
      tool: (name) => (name === "charge" ? objectTool : undefined),
    });
    // Not awaited: a call the object still runs must not hold up the link (its answer is sent when it is ready).
    link.attach("object", (message) => void serveServerCall(calls, message, (out) => alive && link.send("tab", out)));
    object = {
      calls,
      kill: () => {
        alive = false;
        link.attach("object", undefined);
      },
    };
  };
  startObject();
  const openTab = async (storage: Storage, options: TabOptions = {}): Promise<TabProcess> => {
    let alive = true;
    const tabClock: Clock = { now: () => clock.now(), setTimer: (delayMs, fire) => clock.setTimer(delayMs, () => alive && fire()) };
    const client = new ServerCallClient({ clock: tabClock, send: (message) => alive && link.send("object", message) });
    link.attach("tab", (message) => (alive ? client.receive(message) : undefined));
    const reports: Report[] = [];
    const harness = await Harness.open(
      storage,
      {
        registry: createRegistry().install(defineExtension({ name: "shop", tools: [chargeTool("tab", world)] })),
        models: models.api,
        clock: tabClock,
        settings: { progress: { persistWithinMs: 0 } },
        onReport: (report) => reports.push(report),
        ...(options.lease === false ? {} : { lease: { place: "tab", arbiter, ...(options.confirm ? { confirm: options.confirm } : {}) } }),
        ...(options.serverCalls === false ? {} : { serverCalls: client }),
      },
      ctx,
    );
    const kill = () => {
      alive = false;
      link.attach("tab", undefined);
    };
    return { harness, client, storage, reports, kill };
  };
  return {
    clock,
    arbiter,
    link,
    get calls() {
      return object.calls;
    },
    store,
    ...world,
    openTab,
    restartObject: () => {
      object.kill();
      startObject();
    },
  };
}

/** The root conversation with the agent on the faux model, and one input submitted. */
export async function submitCharge(harness: Harness): Promise<Conversation> {
  const root = await harness.root(ctx, { agent: { model: "faux/faux-1" } });
  await root.submit({ type: "input", content: "pay the bill", requestId: "pay" }, ctx);
  return root;
}

/**
 * Runs the world: the schedule's turns on the link first, then it delivers in order; when nothing is in flight, the
 * clock moves to its next timer. Stops when `done` holds.
 */
export async function drive(world: ServerWorld, done: () => boolean | Promise<boolean>, schedule: readonly Step[] = [], limit = 3_000) {
  let turn = 0;
  for (let round = 0; round < limit; round++) {
    await flush(3);
    if (await done()) return;
    const next = schedule[turn++] ?? { pick: 0, action: "deliver" as const };
    if (!world.link.step(next.pick, next.action)) world.clock.next();
    await world.link.handled;
  }
  throw new Error("drive: the world never finished");
}

/** The tab's `pi.tool-result` entries, by call id. */
export async function resultsOf(storage: Storage): Promise<Map<string, unknown[]>> {
  const results = new Map<string, unknown[]>();
  for (const conversation of await storage.listConversations()) {
    for (const entry of await storage.listEntries(conversation.id)) {
      if (entry.kind !== "pi.tool-result") continue;
      const message = (entry.payload as { message: { toolCallId: string; content: unknown } }).message;
      results.set(message.toolCallId, [...(results.get(message.toolCallId) ?? []), message.content]);
    }
  }
  return results;
}

/** Whether the tab's input was answered. */
export async function answered(storage: Storage): Promise<boolean> {
  const [conversation] = await storage.listConversations();
  if (!conversation) return false;
  const [submission] = await storage.listSubmissions(conversation.id);
  return submission?.status === "done";
}
