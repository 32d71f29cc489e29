import { describe, expect, it } from "vitest";
import { KEPT_DECISIONS } from "../src/agent/tasks/approvals.ts";
import { AlreadyDecided, conversationScope, defineTool, MemoryStorage, NotFound } from "../src/index.ts";
import { type AgentOpened, answer, callTools, createWorld, openAgent, ScriptedModels, until } from "./agent-support.ts";
import { ctx } from "./support.ts";

// DESIGN §4c, decision 0024: a conversation keeps the approval records of its last KEPT_DECISIONS ended calls
// (so a late decision is told the first), and lets older ones go, in memory and in storage.

function asking(runs: string[]) {
  return defineTool<{ n: number }>({
    name: "step",
    description: "A step that asks first",
    parameters: { type: "object", properties: { n: { type: "number" } }, required: ["n"] },
    approval: "always",
    execute: ({ n }) => {
      runs.push(`step ${n}`);
      return `did ${n}`;
    },
  });
}

const calls = (ids: string[]) => callTools(ids.map((id, n) => ["step", { n }, id]));

/** The approval records the conversation's storage holds (the session's memory mirrors it), by key. */
async function records(opened: AgentOpened): Promise<string[]> {
  const documents = await opened.storage.listDocuments(conversationScope(opened.root.id));
  return documents
    .map((document) => document.key)
    .filter((key) => key.startsWith("pi.approval:"))
    .sort();
}

const results = async (opened: AgentOpened) => (await opened.root.entries(ctx)).filter((entry) => entry.kind === "pi.tool-result");

describe("approval records are bounded (decision 0024)", () => {
  it("§4c: past the last KEPT_DECISIONS ended calls a record is deleted; a late decision within them is AlreadyDecided naming the first, beyond them a typed NotFound", async () => {
    const runs: string[] = [];
    const total = KEPT_DECISIONS + 6;
    const ids = Array.from({ length: total }, (_, n) => `call_${String(n).padStart(3, "0")}`);
    const models = new ScriptedModels([calls(ids), answer("all done")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld(), tools: [asking(runs)] });
    const submission = await opened.root.submit({ type: "input", content: "go" }, ctx);
    await until(() => opened.root.pendingApprovals().length === total, "every call waits", 2000);
    expect(await records(opened)).toHaveLength(total); // waiting calls all keep theirs

    // Decided one at a time, each ended before the next: approved when even, denied when odd.
    for (const [n, callId] of ids.entries()) {
      await opened.root.decide(callId, { approved: n % 2 === 0 }, ctx);
      await until(async () => (await results(opened)).length === n + 1, `call ${n} ended`);
    }
    expect(await submission.wait(ctx)).toMatchObject({ status: "done", answer: { text: "all done" } });
    expect(runs).toHaveLength(total / 2);

    expect(await records(opened)).toEqual(ids.slice(total - KEPT_DECISIONS).map((id) => `pi.approval:${id}`));
    for (const [n, callId] of ids.entries()) {
      const late = opened.root.decide(callId, { approved: true }, ctx);
      if (n < total - KEPT_DECISIONS) {
        await expect(late).rejects.toBeInstanceOf(NotFound);
        await expect(late).rejects.toThrow(/ended before the conversation's last 64 that did/);
      } else {
        await expect(late).rejects.toBeInstanceOf(AlreadyDecided);
        await expect(late).rejects.toMatchObject({ callId, decision: { approved: n % 2 === 0, by: "person" } });
      }
    }
    // The transcript still says how every call was decided.
    expect((await results(opened)).map((entry) => (entry.payload as { approval?: { approved: boolean } }).approval?.approved)).toEqual(
      ids.map((_, n) => n % 2 === 0),
    );
  });

  it("§4c: a call id a model gives again keeps the record of the call that waits now when the first call's falls out", async () => {
    const runs: string[] = [];
    const others = Array.from({ length: KEPT_DECISIONS }, (_, n) => `other_${n}`);
    const models = new ScriptedModels([calls(["again"]), answer("one"), calls(["again", ...others]), answer("two")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld(), tools: [asking(runs)] });
    const first = await opened.root.submit({ type: "input", content: "first" }, ctx);
    await until(() => opened.root.pendingApprovals().length === 1, "the first call waits");
    await opened.root.decide("again", { approved: true }, ctx);
    await first.wait(ctx);

    const second = await opened.root.submit({ type: "input", content: "second" }, ctx);
    await until(() => opened.root.pendingApprovals().length === KEPT_DECISIONS + 1, "the second round waits", 2000);
    const [waiting] = opened.root.pendingApprovals().filter((pending) => pending.callId === "again");
    for (const callId of others) await opened.root.decide(callId, { approved: false }, ctx);
    await until(() => opened.root.pendingApprovals().length === 1, "the others ended", 2000);
    // The first "again" fell out of the kept ones; the record of the "again" that waits is still there.
    expect(opened.root.pendingApprovals()).toEqual([{ ...waiting, ageMs: 0 }]);
    await opened.root.decide("again", { approved: true }, ctx);
    expect(await second.wait(ctx)).toMatchObject({ status: "done", answer: { text: "two" } });
    expect(runs.filter((run) => run === "step 0")).toHaveLength(2);
  });
});
