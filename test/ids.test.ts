import { describe, expect, it } from "vitest";
import { createRegistry, defineExtension, defineTask, NotFound } from "../src/index.ts";
import { backends, ctx, openHarness, runUntil } from "./support.ts";

// S1: conversations, entries, tasks and submissions share one id space. An id of the wrong kind therefore never
// finds a record of the kind asked for; these tests check that the answer is a NotFound that says what the id is,
// never a silent empty answer.

const sleeper = defineTask<null, { phase: "sleep" }, null>({
  name: "test.sleeper",
  version: 1,
  initial: () => ({ phase: "sleep" }),
  phases: { sleep: async (_task, runtime, context) => runtime.sleepUntil(runtime.now() + 60_000, { phase: "sleep" }, context) },
  abort: async (_task, runtime, context) => runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context),
});

/** Lists the entries of its own task id taken for a conversation id, and ends with what that gave. */
const mixer = defineTask<null, { phase: "list" }, string>({
  name: "test.mixer",
  version: 1,
  initial: () => ({ phase: "list" }),
  phases: {
    list: async (_task, runtime, context) => {
      let result: string;
      try {
        result = `listed ${(await runtime.entries({ conversationId: runtime.taskId }, context)).length}`;
      } catch (error) {
        result = error instanceof NotFound ? `NotFound: ${error.message}` : `other: ${String(error)}`;
      }
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result } }), context);
    },
  },
  abort: async (_task, runtime, context) => runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context),
});

const registry = () => createRegistry().install(defineExtension({ name: "test", tasks: [sleeper, mixer] }));

for (const backend of backends) {
  describe(`S1: an id of the wrong kind is a NotFound that says what it is (${backend.name})`, () => {
    it("a task's id as a conversation, a conversation's id as a task, an entry's id as a submission", async () => {
      const { harness } = await openHarness(await backend.create(), { registry: registry() });
      const root = await harness.root(ctx);
      const { taskId, entryId } = await root.commit(
        (tx) => ({ taskId: tx.createTask(sleeper, null), entryId: tx.appendEntry({ kind: "note", payload: { text: "hi" } }) }),
        ctx,
      );
      expect(() => harness.conversation(taskId)).toThrow(NotFound);
      expect(() => harness.conversation(taskId)).toThrow(`Conversation ${taskId} does not exist (${taskId} is a task's id).`);
      await expect(harness.waitForTask(root.id, ctx)).rejects.toThrow(
        `Task ${root.id} does not exist (${root.id} is a conversation's id).`,
      );
      await expect(harness.abortTask(entryId, ctx)).rejects.toThrow(`Task ${entryId} does not exist (${entryId} is an entry's id).`);
      await expect(harness.submission(entryId, ctx)).rejects.toThrow(`Submission ${entryId} does not exist (${entryId} is an entry's id).`);
      await expect(root.commit((tx) => tx.createTask(sleeper, null, { conversationId: taskId }), ctx)).rejects.toThrow(
        `Conversation ${taskId} does not exist (${taskId} is a task's id).`,
      );
      // An id nobody minted says only that.
      await expect(harness.waitForTask(999_999, ctx)).rejects.toThrow(/^Task 999999 does not exist\.$/);
      await harness.close(ctx);
    });

    it("a phase that lists the entries of its task id instead of its conversation's gets a NotFound, not an empty list", async () => {
      const { harness, clock } = await openHarness(await backend.create(), { registry: registry() });
      const root = await harness.root(ctx);
      const id = await root.commit((tx) => tx.createTask(mixer, null), ctx);
      harness.resume();
      let done: Awaited<ReturnType<typeof harness.getTask>>;
      await runUntil(clock, async () => (done = await harness.getTask(id, ctx))?.state.status === "terminal");
      expect(done!.state).toEqual({
        status: "terminal",
        outcome: { status: "completed", result: `NotFound: Conversation ${id} does not exist (${id} is a task's id).` },
      });
      await harness.close(ctx);
    });
  });
}
