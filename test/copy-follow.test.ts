import { describe, expect, it } from "vitest";
import { waitFor } from "../src/base/context.ts";
import {
  type AnyTool,
  type ConversationViewState,
  createRegistry,
  defineExtension,
  defineTask,
  defineTool,
  InvalidCommit,
  LogOutOfOrder,
  memoryEnvs,
  StaleEpoch,
} from "../src/index.ts";
import { answer, callTools, ScriptedModels } from "./agent-support.ts";
import { openTwoPlaces } from "./copy-support.ts";
import { backends, ctx, runUntil } from "./support.ts";

/** A task whose phase runs until it is signalled; `ran` counts its invocations (where it runs). */
function waiterAt(ran: string[], place: string) {
  return defineTask<null, { phase: "wait" }, null>({
    name: "test.waiter",
    version: 1,
    initial: () => ({ phase: "wait" }),
    phases: {
      wait: (_task, _runtime, context) => {
        ran.push(place);
        return waitFor(new Promise<never>(() => {}), context);
      },
    },
    abort: async (_task, runtime, context) => {
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context);
    },
  });
}

function lookAt(runs: string[], place: string): AnyTool {
  return defineTool({
    name: "look",
    description: "Look around",
    parameters: { type: "object", properties: {} },
    replay: "safe",
    async execute() {
      runs.push(place);
      return "a quiet room";
    },
  });
}

function agentOptions(runs: string[], place: string, models: ScriptedModels) {
  return {
    registry: createRegistry().install(defineExtension({ name: "test", tools: [lookAt(runs, place)] })),
    models: models.api,
    env: memoryEnvs(),
    settings: { progress: { persistWithinMs: 0 } },
  };
}

for (const backend of backends) {
  describe(`a read-only harness follows its copy (decision 0034) on ${backend.name}`, () => {
    it("S5 + 0034: a watcher on the copy sees the holder's commits live, only states the holder showed, and ends with the holder's view", async () => {
      const models = new ScriptedModels([callTools([["look", {}, "call_1"]]), answer("all quiet")]);
      const runs: string[] = [];
      // One registry per place would do as well; the tool records where it ran.
      const places = await openTwoPlaces({ tab: await backend.create(), copy: await backend.create() }, agentOptions(runs, "tab", models));
      const { tab, copy, clock } = places;
      const root = await tab.root(ctx, { agent: { model: "faux/faux-1" } });
      await places.caughtUp();
      const seenAtTab: ConversationViewState[] = [];
      const seenAtCopy: ConversationViewState[] = [];
      root.subscribe((state) => seenAtTab.push(state));
      copy.conversation(root.id).subscribe((state) => seenAtCopy.push(state));
      const submission = await root.submit({ type: "input", content: "look around", requestId: "r1" }, ctx);
      const outcome = await submission.wait(ctx);
      await runUntil(clock, async () => tab.quiet);
      await places.caughtUp();
      await runUntil(clock, async () => seenAtCopy.at(-1)?.entries.length === seenAtTab.at(-1)?.entries.length);

      expect(outcome.status).toBe("done");
      expect(runs).toEqual(["tab"]); // the copy never ran the tool
      // Live: the copy's watcher moved with the turn, not once at the end (user entry, tool call, result, answer).
      expect(seenAtCopy.length).toBeGreaterThanOrEqual(4);
      // Every state the copy showed is one the holder's own watcher showed (a group is one push: it may skip some).
      const atTab = seenAtTab.map((state) => JSON.stringify(state));
      let from = 0;
      for (const state of seenAtCopy) {
        const index = atTab.indexOf(JSON.stringify(state), from);
        expect(index, "a state the holder never showed").toBeGreaterThanOrEqual(0);
        from = index;
      }
      expect(seenAtCopy.at(-1)).toEqual(seenAtTab.at(-1));
      expect(await copy.conversation(root.id).view(ctx)).toEqual(await root.view(ctx));
      // The copy answers the same submission from what it followed.
      expect(await (await copy.submission(submission.id, ctx)).wait(ctx)).toEqual(outcome);
    });

    it("S5: the copy never runs a task; its waits and task graph follow the holder's commits", async () => {
      const ran: string[] = [];
      const stores = { tab: await backend.create(), copy: await backend.create() };
      const options = (place: string) => ({
        registry: createRegistry().install(defineExtension({ name: "test", tasks: [waiterAt(ran, place)] })),
      });
      const places = await openTwoPlaces(stores, options("tab"));
      const { tab, copy, clock } = places;
      const root = await tab.root(ctx);
      const id = await root.commit((tx) => tx.createTask(waiterAt(ran, "tab"), null), ctx);
      tab.resume();
      await runUntil(clock, () => ran.length === 1);
      await places.caughtUp();
      // Running at the holder, `running` at the copy, which does not schedule it.
      expect((await copy.getTask(id, ctx))?.state.status).toBe("running");
      const inspection = await copy.inspect(ctx);
      expect(inspection.scheduling).toBe("read-only");
      expect(inspection.tasks.map((task) => task.record.id)).toEqual([id]);
      const ended = copy.waitForTask(id, ctx);
      await tab.abortTask(id, ctx);
      await places.caughtUp();
      expect((await ended).state).toEqual({ status: "terminal", outcome: { status: "aborted" } });
      expect(ran).toEqual(["tab"]);
      expect((await copy.inspect(ctx)).tasks).toEqual([]);
    });

    it("0029 at the copy: a transaction out of order, of a superseded epoch, without a position, or at a writer is refused and shows nothing", async () => {
      const models = new ScriptedModels([answer("one"), answer("two")]);
      const places = await openTwoPlaces({ tab: await backend.create(), copy: await backend.create() }, agentOptions([], "tab", models));
      const { tab, copy, clock } = places;
      const root = await tab.root(ctx, { agent: { model: "faux/faux-1" } });
      await places.caughtUp();
      const states: ConversationViewState[] = [];
      copy.conversation(root.id).subscribe((state) => states.push(state));
      await runUntil(clock, async () => states.length === 1);
      const before = await copy.conversation(root.id).view(ctx);

      await places.link(false);
      await (await root.submit({ type: "input", content: "first", requestId: "a" }, ctx)).wait(ctx);
      const log = await places.tabStorage.readLog!(places.head, 64);
      expect(log.length).toBeGreaterThan(1);
      // A gap: the second transaction before the first.
      await expect(copy.follow(log[1]!, ctx)).rejects.toThrow(LogOutOfOrder);
      // A position the copy holds already.
      const held = (await places.tabStorage.readLog!(0, 1))[0]!;
      await expect(copy.follow(held, ctx)).rejects.toThrow(LogOutOfOrder);
      // Without a position; and a writable harness takes no pushes.
      const { fence: _fence, ...unfenced } = log[0]!;
      await expect(copy.follow(unfenced as never, ctx)).rejects.toThrow(InvalidCommit);
      await expect(tab.follow(log[0]!, ctx)).rejects.toThrow(InvalidCommit);
      expect(states).toHaveLength(1);
      expect(await copy.conversation(root.id).view(ctx)).toEqual(before);
      expect((await places.copyStorage.load()).log?.position).toBe(places.head);

      await places.link(true);
      expect(states.at(-1)?.entries.map((entry) => entry.kind)).toEqual((await root.entries(ctx)).map((entry) => entry.kind));
      expect(states.at(-1)?.entries.map((entry) => entry.kind)).toContain("pi.assistant");
      // A transaction of an older epoch than the copy's head: another place took the lease since.
      const stale = { ...log[0]!, fence: { epoch: 0, position: places.head + 1 } };
      await expect(copy.follow(stale, ctx)).rejects.toThrow(StaleEpoch);
      expect(await copy.conversation(root.id).view(ctx)).toEqual(await root.view(ctx));
    });
  });
}
