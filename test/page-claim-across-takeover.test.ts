import { describe, expect, it } from "vitest";
import { createHost } from "../src/host/host.ts";
import { createRegistry, defineExtension, definePageTool, MemoryStorage } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { answer, callTool, ScriptedModels } from "./agent-support.ts";
import { OneOwner } from "./one-owner.ts";
import { flush } from "./support.ts";

// Review of 0140 (the reviewer's probes, kept as tests). M1 (S4: an open keeps the claims of the pages still
// connected; S8: a page tool runs once): page p1 watches page tool calls on tab a and claimed call_1. Tab b takes the
// database over, and b's open fails (its storage does not open: nothing swept). a opens it again, and its page tool
// watch moves there — the open passed no `connectedPages`, so its sweep released p1's claim while p1 still watched and
// ran the tool: its answer was refused (PageCallEnded) and the call followed its replay policy. M2 (S3: a stored
// commit is never refused): a close during a turn with a page tool watch live threw HarnessClosed out of the watch's
// commit listener onto the commit line, and the close rejected.

describe("review of 0140: a page's claim across a takeover whose taker never opened, and a close with a watch live", () => {
  it("M1 (S4, S8): p1, still watching on a, keeps its claim of call_1 when a opens the database again", async () => {
    let image: Uint8Array | undefined;
    const lock = new OneOwner();
    const clock = createManualClock(1_000);
    const models = new ScriptedModels([callTool("ask_person", { question: "?" }, "call_1"), answer("thanks")]);
    const tool = definePageTool({
      name: "ask_person",
      description: "Ask",
      parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
      replay: "unsafe",
    });
    const tab = (name: string, failOpen: () => boolean) =>
      createHost({
        database: "db",
        openStorage: async () => {
          if (failOpen()) throw new Error(`${name}'s open failed`);
          const inner = image ? MemoryStorage.fromImage(image) : new MemoryStorage();
          const close = inner.close.bind(inner);
          inner.close = async () => {
            image = await inner.exportImage();
            await close();
          };
          return inner;
        },
        harness: {
          registry: createRegistry().install(defineExtension({ name: "page", tools: [tool] })),
          clock,
          models: models.api,
          resume: true,
        },
        ownership: lock.ownership(name),
        now: () => clock.now(),
      });
    const a = tab("a", () => false);
    await a.ready;
    const conversationId = await a.service.rootConversation({ model: "faux/faux-1" });
    const seen: { callId: string }[][] = [];
    const lost: Error[] = [];
    a.service.watchPageCalls(
      conversationId,
      { pageId: "p1", tools: ["ask_person"] },
      (calls) => void seen.push(calls as never),
      (e) => void lost.push(e),
    );
    await a.service.submit(conversationId, { type: "input", content: "ask me" });
    await expect.poll(() => seen.at(-1)?.length ?? 0).toBe(1);
    const claimed = await a.service.claimPageCall(conversationId, "call_1", { claimId: "k1", pageId: "p1" });
    expect(claimed).toBeTruthy();
    const b = tab("b", () => true); // b's open fails: it never sweeps
    await flush(8);
    b.service.requestTakeover();
    await expect.poll(() => b.service.status().kind).toBe("failed");
    await expect.poll(() => a.service.status().kind).toBe("ready");
    await flush(16);
    expect(lost).toEqual([]);
    // p1 still watches (its watch moved) and ran the tool: its answer under its claim is taken.
    const answered = await a.service
      .answerPageCall(conversationId, "call_1", "k1", { content: [{ type: "text", text: "green" }] } as never)
      .then(
        (r) => ({ ok: r }),
        (e: Error) => ({ error: `${e.name}: ${e.message}` }),
      );
    expect(answered).not.toHaveProperty("error");
    expect(await a.service.close().then(() => "closed")).toBe("closed"); // M2: a close during the turn resolves
  });

  it("M2 (S3): a plain close with a page tool watch live on a claimed call throws nothing out of the commit line", async () => {
    const clock = createManualClock(1_000);
    const models = new ScriptedModels([callTool("ask_person", { question: "?" }, "call_1"), answer("thanks")]);
    const tool = definePageTool({
      name: "ask_person",
      description: "Ask",
      parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
      replay: "unsafe",
    });
    const a = createHost({
      database: "db",
      openStorage: async () => new MemoryStorage(),
      harness: {
        registry: createRegistry().install(defineExtension({ name: "page", tools: [tool] })),
        clock,
        models: models.api,
        resume: true,
      },
      now: () => clock.now(),
    });
    await a.ready;
    const conversationId = await a.service.rootConversation({ model: "faux/faux-1" });
    const seen: unknown[][] = [];
    a.service.watchPageCalls(conversationId, { pageId: "p1", tools: ["ask_person"] }, (calls) => void seen.push(calls as never));
    await a.service.submit(conversationId, { type: "input", content: "ask me" });
    await expect.poll(() => seen.at(-1)?.length ?? 0).toBe(1);
    await a.service.claimPageCall(conversationId, "call_1", { claimId: "k1", pageId: "p1" });
    await a.service.answerPageCall(conversationId, "call_1", "k1", { content: [{ type: "text", text: "green" }] } as never);
    const closed = await a.service.close().then(
      () => "closed",
      (e: Error) => `close rejected: ${e.name}`,
    );
    expect(closed).toBe("closed");
    await flush(16);
  });
});
