import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Acknowledged } from "../src/follow/acknowledged.ts";
import { type LeaseArbiter, memoryArbiter } from "../src/follow/arbiter.ts";
import { definePageTool, defineTool, LeaseNotHeld, type Storage } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { answer, callTool, callTools, createWorld, lookTool, openAgent, ScriptedModels, settle, tasksOf } from "./agent-support.ts";
import { backends, ctx } from "./support.ts";

// Issue 27 item 3, decision 0032: before an external effect (an unsafe tool's intent, a model request) the commit
// that recorded it is acknowledged by the place that could take the lease over; effect-free steps never wait.

function noteTool(runs: { count: number }) {
  return defineTool<{ text: string }>({
    name: "note",
    description: "Append a line",
    parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
    async execute() {
      runs.count++;
      return "noted";
    },
  });
}

async function generationLive(storage: Storage): Promise<{ attempt?: number; requestedAt?: number } | undefined> {
  const [conversation] = await storage.listConversations();
  const live = (await storage.getDocument(`conversation:${conversation!.id}`, "pi.live")) as { generation?: { requestedAt?: number } };
  return live?.generation;
}

for (const backend of backends) {
  describe(`acknowledgement before effects (decision 0032) on ${backend.name}`, () => {
    it("S8/S9: under a lease another place may take over, the model request and the unsafe tool start only once their commit is acknowledged", async () => {
      const storage = await backend.create();
      const clock = createManualClock(1_000);
      const acknowledged = new Acknowledged();
      const runs = { count: 0 };
      const models = new ScriptedModels([callTool("note", { text: "a" }, "call_1"), answer("done")]);
      const waits: number[] = [];
      const { harness, root } = await openAgent(storage, {
        models,
        world: createWorld(),
        tools: [noteTool(runs)],
        clock,
        lease: {
          place: "tab",
          arbiter: memoryArbiter({ clock }),
          confirm: (position, context) => {
            waits.push(position);
            return acknowledged.confirm(position, context);
          },
        },
      });
      let transactions = 0;
      harness.onLog(() => void transactions++);
      await root.submit({ type: "input", content: "note it", requestId: "q1" }, ctx);
      await settle();
      // Every step up to the request was stored without waiting; the request itself waits for the acknowledgement.
      expect((await generationLive(storage))?.requestedAt).toBeDefined();
      expect(models.requests).toHaveLength(0);
      acknowledged.moved(harness.lease!.position);
      await settle();
      expect(models.requests).toHaveLength(1);
      // The tool's intent is stored; the tool waits for it to be acknowledged.
      const [tool] = await tasksOf(storage, "pi.tool");
      expect(tool?.state.status === "running" && tool.state.checkpoint.phase).toBe("execute");
      expect(runs.count).toBe(0);
      acknowledged.moved(harness.lease!.position);
      await settle();
      expect(runs.count).toBe(1);
      expect(models.requests).toHaveLength(1); // the next request waits for its own commit's acknowledgement
      acknowledged.moved(harness.lease!.position);
      await settle();
      expect(models.requests).toHaveLength(2);
      expect(harness.quiet).toBe(true);
      // One wait per effect (two requests, one unsafe tool), none for the other transactions of the turn.
      expect(waits).toHaveLength(3);
      expect(transactions).toBeGreaterThan(6);
      await harness.close(ctx);
    });

    it("S8: a safe tool does not wait (it may run again after a takeover)", async () => {
      const storage = await backend.create();
      const clock = createManualClock(1_000);
      const acknowledged = new Acknowledged();
      const models = new ScriptedModels([callTool("look", {}, "call_1"), answer("done")]);
      const { harness, root } = await openAgent(storage, {
        models,
        world: createWorld(),
        tools: [lookTool()],
        clock,
        lease: { place: "tab", arbiter: memoryArbiter({ clock }), confirm: acknowledged.confirm },
      });
      await root.submit({ type: "input", content: "look", requestId: "q1" }, ctx);
      await settle();
      acknowledged.moved(harness.lease!.position);
      const acknowledgedAt = acknowledged.head;
      await settle();
      // The look ran and its result was stored with no new acknowledgement; only the next request waits.
      const [tool] = await tasksOf(storage, "pi.tool");
      expect(tool?.state.status).toBe("terminal");
      expect(acknowledged.head).toBe(acknowledgedAt);
      expect(models.requests).toHaveLength(1);
      acknowledged.moved(harness.lease!.position);
      await settle();
      expect(models.requests).toHaveLength(2);
      await harness.close(ctx);
    });

    it("DESIGN §4c: an unsafe page tool's claim is answered to the page only once it is acknowledged; a safe one's at once", async () => {
      for (const replay of ["unsafe", "safe"] as const) {
        const storage = await backend.create();
        const clock = createManualClock(1_000);
        const acknowledged = new Acknowledged();
        const models = new ScriptedModels([callTool("ask_person", { question: "Which colour?" }, "call_1"), answer("thanks")]);
        const ask = definePageTool({
          name: "ask_person",
          description: "Ask the person in the page",
          parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
          replay,
        });
        const { harness, root } = await openAgent(storage, {
          models,
          world: createWorld(),
          tools: [ask],
          clock,
          lease: { place: "tab", arbiter: memoryArbiter({ clock }), confirm: acknowledged.confirm },
        });
        await root.submit({ type: "input", content: "ask me", requestId: "q1" }, ctx);
        await settle();
        acknowledged.moved(harness.lease!.position);
        await settle();
        expect(root.pendingPageCalls()).toHaveLength(1);
        let claimed = false;
        const claim = root.claimPageCall("call_1", { claimId: "tab:1", pageId: "tab" }, ctx).then(() => (claimed = true));
        await settle();
        // The claim is stored either way; only the unsafe call's page waits for it to be acknowledged.
        expect(root.pendingPageCalls()[0]?.status).toBe("claimed");
        expect(claimed).toBe(replay === "safe");
        acknowledged.moved(harness.lease!.position);
        await claim;
        await harness.close(ctx);
      }
    });

    it("a pinned lease (no expiry, no one may take over): effects never wait, even with no acknowledgement ever", async () => {
      const storage = await backend.create();
      const clock = createManualClock(1_000);
      const runs = { count: 0 };
      const models = new ScriptedModels([callTool("note", { text: "a" }, "call_1"), answer("done")]);
      const { harness, root } = await openAgent(storage, {
        models,
        world: createWorld(),
        tools: [noteTool(runs)],
        clock,
        lease: { place: "tab", arbiter: memoryArbiter({ clock, ttlMs: Number.POSITIVE_INFINITY }), confirm: new Acknowledged().confirm },
      });
      await root.submit({ type: "input", content: "note it", requestId: "q1" }, ctx);
      await settle();
      expect(runs.count).toBe(1);
      expect(models.requests).toHaveLength(2);
      expect(harness.quiet).toBe(true);
      await harness.close(ctx);
    });

    it("offline under a lease that may be taken over: effect-free steps go on, effects wait, and at the expiry the place stops as a crash stops", async () => {
      const storage = await backend.create();
      const clock = createManualClock(1_000);
      const book = memoryArbiter({ clock, ttlMs: 3_000 });
      // The arbiter is on the other side of the partition: only the first acquire got through.
      const offline: LeaseArbiter = {
        acquire: (place, head) => book.acquire(place, head),
        renew: () => Promise.reject(new TypeError("Failed to fetch")),
        release: () => Promise.reject(new TypeError("Failed to fetch")),
      };
      const models = new ScriptedModels([answer("done")]);
      const { harness, root, reports } = await openAgent(storage, {
        models,
        world: createWorld(),
        clock,
        lease: { place: "tab", arbiter: offline, confirm: new Acknowledged().confirm },
      });
      await root.submit({ type: "input", content: "hello", requestId: "q1" }, ctx);
      await settle();
      const before = harness.lease!.position;
      expect((await generationLive(storage))?.requestedAt).toBeDefined();
      for (let i = 0; i < 10; i++) {
        clock.advance(500);
        await settle();
      }
      // The request never went out; the lease expired on the harness clock and the harness stopped writing.
      expect(models.requests).toHaveLength(0);
      expect(reports.some((report) => report.kind === "error" && report.error instanceof LeaseNotHeld)).toBe(true);
      expect((await harness.inspect(ctx)).scheduling).toBe("closed");
      const [generation] = await tasksOf(storage, "pi.generation");
      expect(generation?.state.status).toBe("running"); // left as a crash leaves it, for whoever holds the log next
      expect((await storage.load()).log?.position).toBe(before);
      await harness.close(ctx);
    });
  });
}

describe("no effect before its acknowledgement, under any schedule of acknowledgements (decision 0032)", () => {
  it("every model request and every run of the unsafe tool starts only once the object acknowledged the commit that recorded it (fast-check)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: -3, max: 1 }), { minLength: 1, maxLength: 40 }), async (schedule) => {
        const clock = createManualClock(1_000);
        const acknowledged = new Acknowledged();
        const intents = new Map<string, number>();
        const violations: string[] = [];
        const started = (what: string, intent: string) => {
          const position = intents.get(intent) ?? Number.POSITIVE_INFINITY;
          if (acknowledged.head < position) violations.push(`${what} at acknowledged ${acknowledged.head} < ${position}`);
        };
        const note = defineTool<{ text: string }>({
          name: "note",
          description: "Append a line",
          parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
          async execute(_args, api) {
            started("note", `tool ${api.taskId}`);
            return "noted";
          },
        });
        const models = new ScriptedModels([
          callTools([
            ["note", { text: "a" }, "call_1"],
            ["note", { text: "b" }, "call_2"],
          ]),
          answer("done"),
        ]);
        const api = models.api;
        const watched = new Proxy(api, {
          get(target, key, receiver) {
            const value = Reflect.get(target, key, receiver);
            if (key !== "streamSimple" || typeof value !== "function") return value;
            return (...args: unknown[]) => {
              started("request", "request");
              return (value as (...a: unknown[]) => unknown).apply(target, args);
            };
          },
        });
        const storage = await backends[0]!.create();
        const { harness, root } = await openAgent(storage, {
          models: { api: watched } as unknown as ScriptedModels, // openAgent reads only its api
          world: createWorld(),
          tools: [note],
          clock,
          lease: { place: "tab", arbiter: memoryArbiter({ clock }), confirm: acknowledged.confirm },
        });
        harness.onLog((batch) => {
          for (const task of batch.tasks) {
            const state = task.state as { status: string; checkpoint?: { phase?: string } };
            if (task.kind === "pi.tool" && state.checkpoint?.phase === "execute") intents.set(`tool ${task.id}`, batch.fence.position);
          }
          for (const document of batch.documents) {
            const generation = (document.value as { generation?: { requestedAt?: number } } | null)?.generation;
            if (document.key === "pi.live" && generation?.requestedAt !== undefined) intents.set("request", batch.fence.position);
          }
        });
        await root.submit({ type: "input", content: "note twice", requestId: "q1" }, ctx);
        // Each turn of the schedule acknowledges the head minus 0..3 (or everything, at 1), then lets the harness run.
        for (const turn of [...schedule, ...Array.from({ length: 12 }, () => 1)]) {
          const head = harness.lease!.position;
          acknowledged.moved(turn === 1 ? head : head + turn);
          await settle(3);
        }
        expect(violations).toEqual([]);
        expect(harness.quiet).toBe(true); // the turn finished once everything was acknowledged
        await harness.close(ctx);
      }),
      { numRuns: 25, seed: 32 },
    );
  });
});

describe("Acknowledged (decision 0032)", () => {
  it("a wait on position P resolves exactly when an acknowledgement at or past P arrived, in any order (fast-check)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.nat(20), { maxLength: 12 }),
        fc.array(fc.nat(20), { minLength: 1, maxLength: 6 }),
        async (acks, waits) => {
          const acknowledged = new Acknowledged();
          const resolved = new Set<number>();
          waits.forEach((position, index) => void acknowledged.confirm(position, ctx).then(() => resolved.add(index)));
          for (const head of acks) acknowledged.moved(head);
          await settle(2);
          const top = Math.max(0, ...acks);
          expect(acknowledged.head).toBe(top);
          for (const [index, position] of waits.entries()) expect(resolved.has(index)).toBe(position <= top);
        },
      ),
      { numRuns: 100, seed: 32 },
    );
  });
});
