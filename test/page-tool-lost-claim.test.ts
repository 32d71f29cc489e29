import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { PendingPageCall } from "../src/agent/tasks/page-calls.ts";
import { ConnectionLost, NotReady } from "../src/errors.ts";
import { HostClient } from "../src/host/client.ts";
import { hostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import { providePageTools } from "../src/host/page-tools.ts";
import { createRegistry, defineExtension, definePageTool, type ToolResultEntryPayload } from "../src/index.ts";
import { PageChat } from "../src/react/page-chat.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { answer, callTool, ScriptedModels, texts, until } from "./agent-support.ts";
import { sqliteMemoryBackend } from "./support.ts";

// Decision 0152, S8: a claim whose reply was lost (ConnectionLost: a dropped socket, a worker move mid-claim; NotReady)
// is claimed again by its provision under the same claim id, which the host takes for a retry. The call is run once and
// answered once, wherever the reply was lost: before the host stored the claim, or after.

type Where = "before" | "after";

async function turn(replay: "safe" | "unsafe") {
  const tool = definePageTool({
    name: "ask_person",
    description: "Ask the person",
    parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
    replay,
  });
  const models = new ScriptedModels([callTool("ask_person", { question: "Which colour?" }, "call_1"), answer("thanks")]);
  const served = createHost({
    database: "test",
    openStorage: () => sqliteMemoryBackend.create(),
    harness: {
      registry: createRegistry().install(defineExtension({ name: "page", tools: [tool] })),
      clock: createManualClock(1_000),
      models: models.api,
      resume: true,
    },
    now: () => 0,
  });
  const client = new HostClient(hostEndpoint(served.service), "page-1");
  await served.ready;
  const conversationId = await client.rootConversation({ model: "faux/faux-1" });
  return { client, conversationId, models };
}

/**
 * The page's host with its first claim replies lost at `losses` (each before or after the host stored the claim). A
 * loss is followed by the watch's list again, as a transport that reconnects asks its watch again (0111/0114).
 */
function lossy(client: HostClient, losses: Array<{ where: Where; error: "ConnectionLost" | "NotReady" }>) {
  const sent: string[] = [];
  let listener: ((calls: PendingPageCall[]) => void) | undefined;
  let last: PendingPageCall[] = [];
  const host = {
    watchPageCalls: (...args: Parameters<HostClient["watchPageCalls"]>) => {
      const [conversationId, page, list, lost] = args;
      listener = list;
      return client.watchPageCalls(
        conversationId,
        page,
        (calls) => {
          last = calls;
          list(calls);
        },
        lost,
      );
    },
    claimPageCall: async (...args: Parameters<HostClient["claimPageCall"]>) => {
      sent.push(args[2].claimId);
      const loss = losses.shift();
      if (!loss) return client.claimPageCall(...args);
      // NotReady says nothing was applied: only a ConnectionLost may come after the host stored the claim.
      if (loss.where === "after" && loss.error === "ConnectionLost") await client.claimPageCall(...args);
      setTimeout(() => listener?.(structuredClone(last)), 0); // the transport's watch asked again
      throw loss.error === "NotReady" ? new NotReady("the object is between its instances") : new ConnectionLost();
    },
    answerPageCall: (...args: Parameters<HostClient["answerPageCall"]>) => client.answerPageCall(...args),
  };
  return { host, sent };
}

async function results(client: HostClient, conversationId: number): Promise<ToolResultEntryPayload[]> {
  const view = await client.openConversation(conversationId);
  const found = view.state.entries.filter((entry) => entry.kind === "pi.tool-result");
  view.close();
  return found.map((entry) => entry.payload as unknown as ToolResultEntryPayload);
}

async function lostReply(replay: "safe" | "unsafe", losses: Array<{ where: Where; error: "ConnectionLost" | "NotReady" }>) {
  const { client, conversationId } = await turn(replay);
  const { host, sent } = lossy(client, losses);
  const runs: number[] = [];
  const errors: unknown[] = [];
  const stop = await providePageTools(
    host,
    client.pageId,
    conversationId,
    {
      ask_person: (_args, call) => {
        runs.push(call.attempt);
        return "green";
      },
    },
    { onError: (error) => errors.push(error) },
  );
  const submission = await client.submit(conversationId, { type: "input", content: "ask me" });
  await until(async () => (await results(client, conversationId)).length > 0, "the call's result", 200);
  expect(await client.waitForSubmission(submission)).toMatchObject({ status: "done" });
  stop();
  return { runs, sent, errors, results: await results(client, conversationId) };
}

describe("a claim whose reply was lost is claimed again under the same claim id (decision 0152, S8)", () => {
  it("S8: the claim ran at the host and its reply dropped: claimed again under the same id, run once, answered once", async () => {
    const { runs, sent, errors, results: found } = await lostReply("unsafe", [{ where: "after", error: "ConnectionLost" }]);
    expect(sent).toHaveLength(2);
    expect(new Set(sent).size).toBe(1); // the same claim id: the host gives its stored claim back
    expect(runs).toEqual([1]);
    expect(found).toHaveLength(1);
    expect(texts(found[0]!.message)).toEqual(["green"]);
    expect(errors).toEqual([]);
  });

  it("S8: the claim's send was lost before the host stored it: claimed again, run once, answered once (a guard: the list asked again did it before too)", async () => {
    const { runs, sent, results: found } = await lostReply("unsafe", [{ where: "before", error: "ConnectionLost" }]);
    expect(new Set(sent).size).toBe(1);
    expect(runs).toEqual([1]);
    expect(found.map((result) => texts(result.message))).toEqual([["green"]]);
  });

  it("S8 (fast-check): wherever the replies are lost, an unsafe tool runs once and its answer is the one result", async () => {
    const loss = fc.record({
      where: fc.constantFrom<Where>("before", "after"),
      error: fc.constantFrom<"ConnectionLost" | "NotReady">("ConnectionLost", "NotReady"),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(loss, { minLength: 1, maxLength: 4 }),
        fc.constantFrom<"safe" | "unsafe">("safe", "unsafe"),
        async (losses, replay) => {
          const { runs, sent, results: found } = await lostReply(replay, [...losses]);
          expect(runs).toEqual([1]);
          expect(new Set(sent).size).toBe(1);
          expect(sent).toHaveLength(losses.length + 1);
          expect(found.map((result) => texts(result.message))).toEqual([["green"]]);
        },
      ),
      { numRuns: 25 },
    );
  });
});

describe("a chat's claim whose reply was lost (useChat's path, decision 0152)", () => {
  /** A view state with call_1 of `ask_person` at `status` after `attempts` claims. */
  const stateOf = (status: "waiting" | "claimed", attempts: number) =>
    ({ live: { run: true, tools: [{ callId: "call_1", name: "ask_person", status: "running", page: { status, attempts } }] } }) as never;
  const reply = { id: "m", steps: [], tools: new Map() } as never;

  it("S8: held while lost, claimed again under the same id at the next state, and then this page's to run", async () => {
    const sent: string[] = [];
    const client = {
      pageId: "page-1",
      watchPageCalls: async () => () => {},
      claimPageCall: async (_conversationId: number, callId: string, claim: { claimId: string }) => {
        sent.push(claim.claimId);
        if (sent.length === 1) throw new ConnectionLost(); // the host stored it; the reply dropped
        return { callId, taskId: 1, toolName: "ask_person", arguments: {}, claimId: claim.claimId, attempt: 1 };
      },
      answerPageCall: async () => {},
    };
    const chat = new PageChat(client as never, 1, ["ask_person"]);
    let changes = 0;
    chat.claim(stateOf("waiting", 0), () => changes++);
    await until(() => changes === 1, "the first claim answered");
    // The host's commit shows the call claimed (by this chat): not sent as another page's, held.
    const claimed = stateOf("claimed", 1);
    expect(chat.mode(claimed, reply)("call_1", "ask_person")).toBe("hold");
    chat.claim(claimed, () => changes++);
    await until(() => changes === 2, "the claim sent again answered");
    expect(sent).toHaveLength(2);
    expect(new Set(sent).size).toBe(1);
    expect(chat.mode(claimed, reply)("call_1", "ask_person")).toBe("client");
  });
});
