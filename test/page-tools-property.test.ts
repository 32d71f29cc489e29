import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { conversationScope, definePageTool, MemoryStorage, type PageToolResult, type ToolResultEntryPayload } from "../src/index.ts";
import { checkJson } from "../src/limits.ts";
import { answer, callTool, createWorld, openAgent, ScriptedModels, until } from "./agent-support.ts";
import { ctx, hostileJson } from "./support.ts";

// R9 §4c, decision 0028: the page tool result boundary. Random results — well-formed, malformed, deep, wide,
// huge — sent under a valid claim against small limits: a malformed one is InvalidArguments, one past the
// limits InvalidInput (nothing written, the claim still holds); one well within them is committed as the
// call's result, exactly as sent. After every refusal a good answer still ends the turn.

const limits = { maxDepth: 8, maxBytes: 3000 };

const leaf = fc.oneof(fc.integer(), fc.boolean(), fc.constant(null), fc.string({ unit: "binary", maxLength: 30 }));
const deep = fc.tuple(fc.integer({ min: 0, max: 14 }), leaf).map(([levels, inner]) => {
  let value: unknown = inner;
  for (let i = 0; i < levels; i++) value = i % 2 ? [value] : { k: value };
  return value;
});
const text = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.integer({ min: 0, max: 6000 }).map((n) => "x".repeat(n)),
);
const item = fc.oneof(
  text.map((t) => ({ type: "text", text: t })),
  fc.constant({ type: "image", data: "aGk=", mimeType: "image/png" }),
  fc.constant({ type: "video", url: "x" }),
  fc.constant({ type: "text" }),
  fc.anything(),
  hostileJson(1),
);
const result = fc.oneof(
  text,
  fc.record({ content: fc.oneof(text, fc.array(item, { maxLength: 4 })) }, { requiredKeys: [] }),
  fc.record(
    { content: fc.array(item, { maxLength: 3 }), isError: fc.oneof(fc.boolean(), fc.anything()), details: deep },
    { requiredKeys: [] },
  ),
  fc.record({ content: text, extra: fc.anything() }),
  fc.anything(),
  hostileJson(),
);

const tool = definePageTool({
  name: "ask_person",
  description: "Ask the person",
  parameters: { type: "object", properties: {} },
});

/** What a well-formed result is: the protocol's shape (checked here independently of the code under test). */
function wellFormed(value: unknown): value is PageToolResult {
  if (typeof value === "string") return true;
  if (
    typeof value !== "object" ||
    value === null ||
    Array.isArray(value) ||
    ![Object.prototype, null].includes(Object.getPrototypeOf(value))
  )
    return false;
  const fields = value as Record<string, unknown>;
  if (Object.keys(fields).some((key) => !["content", "isError", "details"].includes(key))) return false;
  if (fields.isError !== undefined && typeof fields.isError !== "boolean") return false;
  const content = fields.content;
  if (content !== undefined && typeof content !== "string") {
    if (!Array.isArray(content)) return false;
    const ok = (entry: unknown) => {
      const e = entry as Record<string, unknown> | null;
      if (typeof e !== "object" || e === null) return false;
      if (e.type === "text") return typeof e.text === "string" && Object.keys(e).every((key) => key === "type" || key === "text");
      if (e.type === "image")
        return (
          typeof e.data === "string" && e.data !== "" && typeof e.mimeType === "string" && e.mimeType !== "" && Object.keys(e).length === 3
        );
      return false;
    };
    if (!content.every(ok)) return false;
  }
  if (fields.details !== undefined) {
    try {
      JSON.stringify(fields.details);
    } catch {
      return false;
    }
  }
  return true;
}

const fits = (value: unknown, margin: number) => {
  try {
    checkJson(value, { maxDepth: limits.maxDepth - 4, maxBytes: limits.maxBytes - margin });
    return true;
  } catch {
    return false;
  }
};
const withinLimits = (value: unknown) => {
  try {
    checkJson(value, limits);
    return true;
  } catch {
    return false;
  }
};

describe("page tool results at the boundary (R9 §4c, decision 0028)", () => {
  it("R9 §4c: malformed InvalidArguments, past the limits InvalidInput, nothing written; well within them committed as sent", async () => {
    let runs = 0;
    let accepted = 0;
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(result, async (sent) => {
        runs++;
        const models = new ScriptedModels([callTool("ask_person", {}, "call_1"), answer("thanks")]);
        const opened = await openAgent(new MemoryStorage(), { models, world: createWorld(), tools: [tool], settings: { limits } });
        const submission = await opened.root.submit({ type: "input", content: "ask" }, ctx);
        await until(() => opened.root.pendingPageCalls().length === 1, "the call waits");
        await opened.root.claimPageCall("call_1", { claimId: "c1" }, ctx);
        const key = ["pi.page-call:call_1", conversationScope(opened.root.id)] as const;
        const before = await opened.storage.getDocument(key[1], key[0]);
        let error: Error | undefined;
        try {
          await opened.root.answerPageCall("call_1", "c1", sent as PageToolResult, ctx);
        } catch (caught) {
          error = caught as Error;
        }
        const shaped = wellFormed(sent);
        if (!shaped) expect(error?.name).toBe("InvalidArguments");
        else if (!withinLimits(sent)) expect(error?.name).toBe("InvalidInput");
        else if (fits(sent, 800)) expect(error).toBeUndefined();
        else if (error) expect(error.name).toBe("InvalidInput");
        if (error) {
          refused++;
          expect(await opened.storage.getDocument(key[1], key[0])).toEqual(before);
          expect(opened.root.pendingPageCalls()).toMatchObject([{ status: "claimed" }]);
          await opened.root.answerPageCall("call_1", "c1", "fine", ctx);
        } else accepted++;
        expect(await submission.wait(ctx)).toMatchObject({ status: "done" });
        const entry = (await opened.root.entries(ctx)).find((candidate) => candidate.kind === "pi.tool-result");
        const message = (entry!.payload as unknown as ToolResultEntryPayload).message;
        if (!error) {
          const given = typeof sent === "string" ? { content: sent } : (sent as Exclude<PageToolResult, string>);
          const content =
            typeof given.content === "string" ? (given.content ? [{ type: "text", text: given.content }] : []) : (given.content ?? []);
          expect(message.content).toEqual(content);
          expect(message.isError).toBe(given.isError === true);
          if (given.details !== undefined)
            expect((message as { details?: unknown }).details).toEqual(JSON.parse(JSON.stringify(given.details)));
        }
        await opened.harness.close(ctx);
      }),
      { numRuns: 120, seed: 2028 },
    );
    console.log(`page tool results: ${runs} runs, ${accepted} accepted, ${refused} refused`);
    expect(accepted).toBeGreaterThan(10);
    expect(refused).toBeGreaterThan(10);
  });
});
