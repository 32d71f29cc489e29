import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { HostClient } from "../src/host/client.ts";
import type { HarnessService } from "../src/host/protocol.ts";
import type { SubmissionDraft } from "../src/index.ts";
import { createRegistry, BACKGROUND_CONTEXT as ctx, defineExtension, defineTask, type Harness, type Storage } from "../src/index.ts";
import { type Death, SweepChannel, World, type WorldSetup } from "./tabs-world.ts";

// The tab hand-over sweep (issue 21): a follower tab's call, with the leading tab dying before and after every
// message between the tabs and every commit of that call, and in sampled worlds the next leader dying too at a
// later step. Three tabs: tab1 leads, tab2's worker is next in the database lock's queue, tab3 is the follower
// whose page makes the call (its own worker is last in line). In every world: the call settles; a submission
// and a task creation (retried under their keys) resolve and are applied exactly once; any other call
// resolves having been applied once, or rejects with ConnectionLost having been applied at most once.

const once = defineTask<{ n: number }, { phase: "run" }, string>({
  name: "sweep.once",
  version: 1,
  initial: () => ({ phase: "run" }),
  phases: {
    run: async (_task, runtime, context) => {
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "done" } }), context);
    },
  },
  abort: async (_task, runtime, context) => {
    await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context);
  },
});

const SETUP: WorldSetup = {
  workers: 3,
  registry: () => createRegistry().install(defineExtension({ name: "sweep", tasks: [once] })),
  methods: {
    /** An app method that changes the database: not retried after a hand-over. */
    note: async (harness: Harness) => {
      const root = await harness.root(ctx);
      await root.commit((tx) => tx.appendEntry({ kind: "sweep.method", payload: 1 }), ctx);
      return "noted";
    },
  },
};

interface Call {
  name: string;
  /** A new leader runs it again (it carries a key): it must resolve. */
  retried: boolean;
  run(client: HostClient, root: number): Promise<unknown>;
  /** The ids of what the call created in the database (or one `1` per effect without an id). */
  applied(storage: Storage, root: number): Promise<unknown[]>;
}

const CALLS: Call[] = [
  {
    name: "submit (a write)",
    retried: true,
    run: (client, root) => client.submit(root, { type: "write", entry: { kind: "sweep.note", data: "from tab3" } }),
    async applied(storage, root) {
      const submissions = (await storage.listSubmissions(root)).map((submission) => submission.id);
      const entries = (await storage.listEntries(root)).filter((entry) => entry.kind === "sweep.note");
      // A write's entry is committed with its submission: one each.
      return entries.length === submissions.length ? submissions : [...submissions, `${entries.length} entries`];
    },
  },
  {
    name: "createTask with a key",
    retried: true,
    run: (client) => client.createTask("sweep.once", { n: 1 }, { key: "the-key" }),
    applied: async (storage) => (await storage.listTasks()).filter((task) => task.kind === "sweep.once").map((task) => task.id),
  },
  {
    name: "createTask (the follower adds the key)",
    retried: true,
    run: (client) => client.createTask("sweep.once", { n: 1 }),
    applied: async (storage) => (await storage.listTasks()).filter((task) => task.kind === "sweep.once").map((task) => task.id),
  },
  {
    name: "createConversation",
    retried: false,
    run: (client) => client.createConversation(),
    applied: async (storage, root) => (await storage.listConversations()).map((c) => c.id).filter((id) => id !== root),
  },
  {
    name: "an app method that commits",
    retried: false,
    run: (client) => client.call("note"),
    applied: async (storage, root) => (await storage.listEntries(root)).filter((entry) => entry.kind === "sweep.method").map(() => "noted"),
  },
];

interface Outcome {
  /** Steps counted when the call settled. */
  settledAt: number;
  /** What broke an invariant in this world, with the steps that led there. */
  violation?: string;
}

const saved = globalThis.BroadcastChannel;
beforeEach(() => {
  (globalThis as { BroadcastChannel: unknown }).BroadcastChannel = SweepChannel;
});
afterEach(() => {
  globalThis.BroadcastChannel = saved;
});

/** One world: the follower's call with `deaths`, and the invariants checked at its end. */
async function runWorld(call: Call, deaths: Death[], worldSetup: WorldSetup): Promise<Outcome> {
  const world = new World(worldSetup);
  const global = globalThis as { navigator?: unknown };
  const navigator = global.navigator;
  global.navigator = { locks: world.locks };
  try {
    world.start();
    if (!(await world.untilStatus((status) => status.kind === "ready" && status.role === "follower")))
      throw new Error("tab3 never followed tab1");
    const root = await world.asFollower(() => world.client.rootConversation());
    world.count(deaths);
    let result: { value: unknown } | { error: Error } | undefined;
    let settledAt = -1;
    void world.asFollower(() =>
      call.run(world.client, root).then(
        (value) => (result = { value }),
        (error: Error) => (result = { error }),
      ),
    );
    const settled = await world.settle(() => {
      if (result !== undefined && settledAt < 0) settledAt = world.steps.length;
      return result !== undefined;
    });
    const violation = (what: string) => ({
      settledAt,
      violation: `${call.name}, deaths ${JSON.stringify(deaths)}: ${what}; steps:\n  ${world.steps.join("\n  ")}`,
    });
    if (!settled) return violation("the call was left hanging");
    // Whoever leads now, tab3's page reaches the database again (as a follower of tab2, or leading itself).
    if (!(await world.settle(() => world.client.status.kind === "ready")))
      return violation(`tab3's page never reached the database again (status ${JSON.stringify(world.client.status)})`);
    const applied = await call.applied(world.storage(), root);
    if ("error" in result!) {
      if (call.retried || result.error.name !== "ConnectionLost")
        return violation(`the call rejected with ${result.error.name}: ${result.error.message}`);
      if (applied.length > 1) return violation(`it rejected, and was applied ${applied.length} times`);
    } else if (JSON.stringify(applied) !== JSON.stringify([result!.value])) {
      return violation(`it resolved ${JSON.stringify(result!.value)}, and the database holds ${JSON.stringify(applied)}`);
    }
    return { settledAt };
  } finally {
    world.stop();
    global.navigator = navigator;
  }
}

const SIDES = ["before", "after"] as const;

/**
 * Every world of one call: with no death, with the leader dying before and after each step of the call, and
 * for each of those with the next leader dying too before and after each later step until the call settled.
 * Stops at the first violation.
 */
async function sweep(call: Call, worldSetup: WorldSetup = SETUP) {
  const counts = { worlds: 1, steps: 0, double: 0 };
  const clean = await runWorld(call, [], worldSetup);
  counts.steps = clean.settledAt;
  if (clean.violation) return { ...counts, violation: clean.violation };
  for (let at = 0; at < clean.settledAt; at++)
    for (const side of SIDES) {
      const first: Death = { at, side };
      const single = await runWorld(call, [first], worldSetup);
      counts.worlds++;
      if (single.violation) return { ...counts, violation: single.violation };
      for (let next = at + 1; next < single.settledAt; next++)
        for (const nextSide of SIDES) {
          const double = await runWorld(call, [first, { at: next, side: nextSide }], worldSetup);
          counts.worlds++;
          counts.double++;
          if (double.violation) return { ...counts, violation: double.violation };
        }
    }
  return { ...counts, violation: undefined };
}

describe("tab hand-over sweep", () => {
  for (const call of CALLS) {
    it(`${call.name}: the leader dies before or after every step of a follower's call, then the next leader too at every later step; applied exactly once, nothing left hanging`, async () => {
      const result = await sweep(call);
      console.log(`tab hand-over sweep, ${call.name}: ${result.worlds} worlds (${result.steps} steps, ${result.double} with two deaths)`);
      expect(result.violation).toBeUndefined();
    }, 120_000);
  }

  it("the sweep catches a leader that ignores the follower's idempotency keys: a submission applied twice", async () => {
    const forgetful = (host: HarnessService): HarnessService =>
      new Proxy(host, {
        get(target, name, receiver) {
          if (name === "submit")
            return (conversationId: number, { requestId: _key, ...draft }: SubmissionDraft) => target.submit(conversationId, draft);
          return Reflect.get(target, name, receiver);
        },
      });
    const result = await sweep(CALLS[0]!, { ...SETUP, served: forgetful });
    expect(result.violation).toMatch(/the database holds \[\d+,\d+\]/);
  });
});
