import { describe, expect, it } from "vitest";
import { defineTool, type ExecutionEnv, type Settings, type Storage, type ToolResultEntryPayload } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import {
  type AgentOpened,
  type AgentWorld,
  answer,
  callTool,
  createWorld,
  INTERRUPTED,
  openAgent,
  ScriptedModels,
  settle,
  tasksOf,
  texts,
  until,
  untilAborted,
} from "./agent-support.ts";
import { type Backend, backends, ctx } from "./support.ts";

/** The seed's query over the tool probe (S8, S11). */
const PROBE_QUERY = `SELECT id, kind, status, record ->> '$.restarts' AS restarts,
       record ->> '$.state.checkpoint.phase' AS phase,
       record ->> '$.state.checkpoint.replay' AS replay
FROM tasks ORDER BY id;`;

/**
 * The seed's tool probe: `append` appends `hello\n` to notes.txt, outputs `working\n`, then (in the first
 * process) waits until the process is gone. `block` is per process: the reopened harness runs it to the end.
 */
function appendTool(options: { replay?: "safe" | "unsafe"; block: boolean; runs: { count: number } }) {
  return defineTool<{ text: string }>({
    name: "append",
    description: "Append text to notes.txt",
    parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
    ...(options.replay ? { replay: options.replay } : {}),
    async execute({ text }, api, context) {
      options.runs.count++;
      const env = await api.env<ExecutionEnv>();
      await env.append("notes.txt", text, context);
      api.output("working\n");
      if (options.block) await untilAborted(context.abortSignal);
      return "appended";
    },
  });
}

interface Probe {
  backend: Backend;
  world: AgentWorld;
  first: AgentOpened;
  image: Uint8Array;
  submissionId: number;
  generationId: number;
  toolId: number;
}

/**
 * First process: the model calls `append`; the tool writes notes.txt and its output, the output is persisted
 * (the clock passes `persistWithinMs`, unless `waitForPersist` is false), and the process dies there.
 */
async function cutDuringTool(
  backend: Backend,
  options: { replay?: "safe" | "unsafe"; settings?: Settings; waitForPersist?: boolean },
): Promise<Probe> {
  const world = createWorld();
  const models = new ScriptedModels([callTool("append", { text: "hello\n" }, "call_1")]);
  const runs = { count: 0 };
  const first = await openAgent(await backend.create(), {
    models,
    world,
    tools: [appendTool({ replay: options.replay, block: true, runs })],
    settings: options.settings,
  });
  const submission = await first.root.submit({ type: "input", content: "append hello to notes.txt" }, ctx);
  await until(() => runs.count === 1, "the tool ran");
  await settle();
  const withinMs = options.settings?.progress?.persistWithinMs ?? 1000;
  if (options.waitForPersist !== false) {
    first.clock.advance(withinMs);
    await until(async () => (await first.root.view(ctx)).live.tools?.[0]?.output === "working\n", "the output is persisted");
  }
  const image = await first.storage.exportImage(); // the process dies here: before the result
  const [generation] = await tasksOf(first.storage, "pi.generation");
  const [tool] = await tasksOf(first.storage, "pi.tool");
  return { backend, world, first, image, submissionId: submission.id, generationId: generation!.id, toolId: tool!.id };
}

/** Second process: reopen on the image, with the tool as installed now (or not installed at all). */
async function reopen(probe: Probe, options: { replay?: "safe" | "unsafe"; installed?: boolean; settings?: Settings }) {
  const models = new ScriptedModels([answer("noted")]);
  const runs = { count: 0 };
  const storage: Storage = await probe.backend.fromImage(probe.image);
  const second = await openAgent(storage, {
    models,
    world: probe.world,
    tools: options.installed === false ? [] : [appendTool({ replay: options.replay, block: false, runs })],
    settings: options.settings,
    clock: createManualClock(probe.first.clock.now()),
  });
  const afterOpen = (await second.harness.getTask(probe.toolId, ctx))!;
  const outcome = await (await second.harness.submission(probe.submissionId, ctx)).wait(ctx);
  const tool = (await second.harness.getTask(probe.toolId, ctx))!;
  const results = (await second.root.entries(ctx)).filter((entry) => entry.kind === "pi.tool-result");
  const result = (results[0]!.payload as unknown as ToolResultEntryPayload).message;
  return { second, models, runs, afterOpen, outcome, tool, results, result };
}

for (const backend of backends) {
  describe(`S8 the seed's tool probe on ${backend.name}`, () => {
    it("S8 replay unsafe: the cut tool is not run again; the model gets its persisted output and the interruption", async () => {
      const probe = await cutDuringTool(backend, {});

      // Before the reopen: what the crash left in the tasks table.
      const before = await backend.fromImage(probe.image, { readOnly: true });
      const generation = (await before.getTask(probe.generationId))!;
      const tool = (await before.getTask(probe.toolId))!;
      expect(generation.state).toMatchObject({ status: "waiting", checkpoint: { phase: "tools" } });
      expect(generation.restarts).toBeUndefined();
      expect(tool.state).toEqual({
        status: "running",
        checkpoint: { phase: "execute", arguments: { text: "hello\n" }, replay: "unsafe" },
        progressed: expect.any(Number),
      });
      expect(tool.restarts).toBeUndefined();
      if (backend.name.startsWith("SQLite")) {
        const rows = await before.query(PROBE_QUERY);
        expect(rows.map((row) => [row.kind, row.status, row.restarts, row.phase, row.replay])).toEqual([
          ["pi.generation", "waiting", null, "tools", null],
          ["pi.tool", "running", null, "execute", "unsafe"],
        ]);
      }

      const { second, models, runs, afterOpen, outcome, tool: ended, results, result } = await reopen(probe, {});
      expect(afterOpen.state).toMatchObject({ status: "pending", checkpoint: { phase: "execute", replay: "unsafe" } });
      expect(afterOpen.restarts).toBe(1);
      expect(runs.count).toBe(0);
      expect(probe.world.envs.get(second.root.id).snapshot()).toEqual({ "notes.txt": "hello\n" });
      expect(results).toHaveLength(1);
      expect(result.isError).toBe(true);
      expect(texts(result)).toEqual(["working\n", INTERRUPTED("append")]);
      expect(ended.state).toMatchObject({
        status: "terminal",
        outcome: { status: "failed", error: { message: "Tool append was interrupted and may have partially run" } },
      });
      expect(second.reports).toContainEqual(
        expect.objectContaining({ kind: "task_interrupted", taskId: probe.toolId, taskKind: "pi.tool", reason: "interrupted" }),
      );
      // The result is an ordinary tool result: the model's next request contains it.
      const sent = models.requests[0]!.find((message) => message.role === "toolResult");
      expect(sent).toMatchObject({ toolCallId: "call_1", isError: true });
      expect(texts(sent!)).toEqual(["working\n", INTERRUPTED("append")]);
      expect(outcome).toMatchObject({ status: "done", answer: { text: "noted" } });
    });

    it("S8 replay safe then and now: the tool runs again, notes.txt has two lines, the result is `appended`", async () => {
      const probe = await cutDuringTool(backend, { replay: "safe" });
      const { second, runs, tool, result, outcome } = await reopen(probe, { replay: "safe" });
      expect(runs.count).toBe(1);
      expect(probe.world.envs.get(second.root.id).snapshot()).toEqual({ "notes.txt": "hello\nhello\n" });
      expect(result.isError).toBe(false);
      expect(texts(result)).toEqual(["appended"]);
      expect(tool.state).toMatchObject({ status: "terminal", outcome: { status: "completed" } });
      expect(second.reports.filter((report) => report.kind === "task_interrupted")).toEqual([]);
      expect(outcome.status).toBe("done");
    });

    for (const [name, stored, current, installed] of [
      ["stored safe, current unsafe", "safe", "unsafe", true],
      ["stored unsafe, current safe", "unsafe", "safe", true],
      ["stored safe, tool no longer installed", "safe", "safe", false],
    ] as const) {
      it(`S8 ${name}: no rerun, an interrupted error result`, async () => {
        const probe = await cutDuringTool(backend, { replay: stored });
        const { second, runs, result, tool } = await reopen(probe, { replay: current, installed });
        expect(runs.count).toBe(0);
        expect(probe.world.envs.get(second.root.id).snapshot()).toEqual({ "notes.txt": "hello\n" });
        expect(result.isError).toBe(true);
        expect(texts(result)).toEqual(["working\n", INTERRUPTED("append")]);
        expect(tool.state).toMatchObject({ status: "terminal", outcome: { status: "failed" } });
      });
    }
  });
}

describe("S8 lazy output persistence (settings.progress.persistWithinMs)", () => {
  const backend = backends[0]!;

  it("S8 output written less than persistWithinMs before the cut is not in the result", async () => {
    const probe = await cutDuringTool(backend, { waitForPersist: false });
    expect((await probe.first.root.view(ctx)).live.tools?.[0]?.output).toBeUndefined();
    probe.first.clock.advance(999); // still inside the window: nothing persisted yet
    await settle();
    const image = await probe.first.storage.exportImage();
    const { result } = await reopen({ ...probe, image }, {});
    expect(texts(result)).toEqual([INTERRUPTED("append")]);
  });

  it("S8 with persistWithinMs 0 every chunk is persisted at once, so it is in the result", async () => {
    const settings = { progress: { persistWithinMs: 0 } };
    const probe = await cutDuringTool(backend, { settings, waitForPersist: false });
    await until(async () => (await probe.first.root.view(ctx)).live.tools?.[0]?.output === "working\n", "the output is persisted");
    const image = await probe.first.storage.exportImage();
    const { result } = await reopen({ ...probe, image }, { settings });
    expect(texts(result)).toEqual(["working\n", INTERRUPTED("append")]);
  });
});

describe("S8 a cut before the intent commit", () => {
  it("S8 reruns the call phase: beforeTool runs again, the tool runs once", async () => {
    const backend = backends[0]!;
    const world = createWorld();
    const asked: number[] = [];
    let gate = true;
    const hooks = {
      async beforeTool(_call: unknown, context: import("../src/index.ts").Context) {
        asked.push(asked.length + 1);
        if (gate) await untilAborted(context.abortSignal); // the first process dies inside the hook
        return undefined;
      },
    };
    const runs = { count: 0 };
    const models = new ScriptedModels([callTool("append", { text: "hello\n" }, "call_1")]);
    const first = await openAgent(await backend.create(), { models, world, tools: [appendTool({ block: false, runs })], hooks });
    const submission = await first.root.submit({ type: "input", content: "append hello" }, ctx);
    await until(() => asked.length === 1, "beforeTool was asked");
    const image = await first.storage.exportImage();
    const [tool] = await tasksOf(await backend.fromImage(image, { readOnly: true }), "pi.tool");
    expect(tool!.state).toEqual({ status: "running", checkpoint: { phase: "call" } });

    gate = false;
    const second = await openAgent(await backend.fromImage(image), {
      models: new ScriptedModels([answer("ok")]),
      world,
      tools: [appendTool({ block: false, runs })],
      hooks,
      clock: createManualClock(first.clock.now()),
    });
    const outcome = await (await second.harness.submission(submission.id, ctx)).wait(ctx);
    expect(outcome.status).toBe("done");
    expect(asked).toEqual([1, 2]);
    expect(runs.count).toBe(1);
    expect(world.envs.get(second.root.id).snapshot()).toEqual({ "notes.txt": "hello\n" });
  });
});

describe("S6 S8 a tool at the restart limit", () => {
  it("S6 S8 writes a restart_limit error result, never reruns, reports task_interrupted (restart_limit)", async () => {
    const backend = backends[0]!;
    const settings = { restartLimit: 1 };
    const probe = await cutDuringTool(backend, { replay: "safe", settings });
    const { second, runs, result, tool } = await reopen(probe, { replay: "safe", settings });
    expect(runs.count).toBe(0);
    expect(result.isError).toBe(true);
    expect(texts(result)).toEqual([
      "working\n",
      "<harness>\n[error] Tool append was cut off 1 times in a row without finishing, so it was not run again (restart limit 1)\n</harness>",
    ]);
    expect((result as unknown as { code?: string }).code).toBeUndefined();
    expect(tool.state).toMatchObject({ status: "terminal", outcome: { status: "failed" } });
    expect(second.reports).toContainEqual(
      expect.objectContaining({ kind: "task_interrupted", taskKind: "pi.tool", reason: "restart_limit" }),
    );
    const entry = (await second.root.entries(ctx)).find((candidate) => candidate.kind === "pi.tool-result")!;
    expect((entry.payload as unknown as ToolResultEntryPayload).code).toBe("restart_limit");
  });
});

describe("S8 named crash points (HarnessOptions.crashPoint)", () => {
  const backend = backends[0]!;

  /** Cuts the first process at crash point `name`: the image is copied there and the process never goes on. */
  async function cutAt(name: string, settings?: Settings) {
    const world = createWorld();
    const runs = { count: 0 };
    let image: Uint8Array | undefined;
    let storage: Storage | undefined;
    const first = await openAgent((storage = await backend.create()), {
      models: new ScriptedModels([callTool("append", { text: "hello\n" }, "call_1")]),
      world,
      tools: [appendTool({ block: false, runs })],
      settings,
      crashPoint: async (point) => {
        if (point !== name || image) return;
        image = await storage!.exportImage();
        await new Promise(() => {}); // the process is gone
      },
    });
    const submission = await first.root.submit({ type: "input", content: "append hello" }, ctx);
    await until(() => image !== undefined, `crash point ${name}`);
    return {
      probe: {
        backend,
        world,
        first,
        image: image!,
        submissionId: submission.id,
        generationId: 0,
        toolId: (await tasksOf(first.storage, "pi.tool"))[0]!.id,
      },
      runs,
    };
  }

  it("S8 tool:after-intent: the tool had not started, but recovery cannot know; unsafe means no rerun", async () => {
    const { probe, runs } = await cutAt("tool:after-intent");
    expect(runs.count).toBe(0);
    const { second, runs: rerun, result } = await reopen(probe, {});
    expect(rerun.count).toBe(0);
    expect(probe.world.envs.get(second.root.id).snapshot()).toEqual({});
    expect(texts(result)).toEqual([INTERRUPTED("append")]);
  });

  it("S8 tool:output-persisted with persistWithinMs 0: the seed's probe cut exactly after the output commit", async () => {
    const settings = { progress: { persistWithinMs: 0 } };
    const { probe } = await cutAt("tool:output-persisted", settings);
    const { second, result } = await reopen(probe, { settings });
    expect(probe.world.envs.get(second.root.id).snapshot()).toEqual({ "notes.txt": "hello\n" });
    expect(texts(result)).toEqual(["working\n", INTERRUPTED("append")]);
  });
});
