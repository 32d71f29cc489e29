import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ConnectionLost } from "../src/errors.ts";
import { HostClient } from "../src/host/client.ts";
import { hostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import { providePageTools } from "../src/host/page-tools.ts";
import { createRegistry, defineExtension, definePageTool } from "../src/index.ts";
import { PageChat } from "../src/react/page-chat.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { answer, callTool, ScriptedModels } from "./agent-support.ts";
import { scriptedHost, tick } from "./page-tool-claim-script.ts";
import { sqliteMemoryBackend } from "./support.ts";

describe("a resent claim that wins a later attempt is run (decision 0152's review, M1)", () => {
  it("S8: :1 resent, released, :2 sent; the host applies :1 first at attempt 2: the call runs once, answered under :1", async () => {
    const script = scriptedHost();
    const runs: number[] = [];
    const stop = await providePageTools(script.host as never, "page-1", 1, {
      t: (_a, call) => {
        runs.push(call.attempt);
        return "ok";
      },
    });
    await script.releasedWhileResent();
    expect(script.sent.map((id) => id.slice(id.indexOf(":")))).toEqual([":c:1", ":c:1", ":c:2"]);
    script.pending.shift()?.ok(); // the resend of :1 wins attempt 2
    await tick();
    script.pending.shift()?.ok(); // :2 is PageCallTaken
    await tick();
    script.list();
    await tick();
    expect(script.record).toMatchObject({ status: "claimed", attempts: 2 });
    expect(runs).toEqual([2]);
    expect(script.answers).toEqual([script.sent[0]]);
    stop();
  });

  it("S8: the same race with :2's refusal first: still run once at attempt 2", async () => {
    const script = scriptedHost();
    const runs: number[] = [];
    const stop = await providePageTools(script.host as never, "page-1", 1, {
      t: (_a, call) => {
        runs.push(call.attempt);
        return "ok";
      },
    });
    await script.releasedWhileResent();
    const [resend, second] = [script.pending.shift(), script.pending.shift()];
    const resendReply = resend?.store(); // applied first at the host: attempt 2
    second?.ok(); // PageCallTaken, its reply read first here
    await tick();
    expect(runs).toEqual([]);
    resendReply?.();
    await tick();
    script.list();
    await tick();
    expect(runs).toEqual([2]);
    expect(script.answers).toHaveLength(1);
    stop();
  });

  it("a guard: a provision that stopped does not run the claim that comes back for the later attempt", async () => {
    const script = scriptedHost();
    const runs: number[] = [];
    const stop = await providePageTools(script.host as never, "page-1", 1, {
      t: (_a, call) => {
        runs.push(call.attempt);
        return "ok";
      },
    });
    await script.releasedWhileResent();
    stop();
    script.pending.shift()?.ok();
    script.pending.shift()?.ok();
    await tick();
    expect(runs).toEqual([]);
  });
});

describe("a page id too long for the wire is refused at the client's creation (decision 0152's review, L1)", () => {
  const serve = () => {
    const tool = definePageTool({ name: "ask_person", description: "Ask", parameters: { type: "object", properties: {} }, replay: "safe" });
    const models = new ScriptedModels([callTool("ask_person", {}, "call_1"), answer("thanks")]);
    return createHost({
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
  };

  it("121 and 185 characters (and empty): InvalidSetting naming the cap", () => {
    const served = serve();
    for (const pageId of ["p".repeat(121), "p".repeat(185), ""]) {
      expect(() => new HostClient(hostEndpoint(served.service), pageId)).toThrow(
        expect.objectContaining({ name: "InvalidSetting", message: expect.stringContaining("120") }),
      );
    }
  });

  it("fast-check: any page id of 1 to 120 characters is taken, any longer one is InvalidSetting", () => {
    const served = serve();
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 300 }), fc.string({ minLength: 1, maxLength: 1, unit: "binary" }), (length, unit) => {
        const pageId = unit.repeat(length);
        const make = () => new HostClient(hostEndpoint(served.service), pageId);
        if (pageId.length <= 120) expect(make().pageId).toBe(pageId);
        else expect(make).toThrow(expect.objectContaining({ name: "InvalidSetting" }));
      }),
      { numRuns: 100 },
    );
  });

  it("a guard: 120 characters, the page's tool is claimed and run, with no error", async () => {
    const served = serve();
    const client = new HostClient(hostEndpoint(served.service), "p".repeat(120));
    await served.ready;
    const conversationId = await client.rootConversation({ model: "faux/faux-1" });
    const errors: unknown[] = [];
    const runs: string[] = [];
    await client.providePageTools(
      conversationId,
      {
        ask_person: (_a, call) => {
          runs.push(call.callId);
          return "ok";
        },
      },
      { onError: (e) => errors.push(e) },
    );
    await client.submit(conversationId, { type: "input", content: "ask" });
    for (let i = 0; i < 200 && runs.length === 0 && errors.length === 0; i++) await tick(1);
    expect(errors).toEqual([]);
    expect(runs).toEqual(["call_1"]);
  });
});

describe("a chat's lost claim whose call left the view is not held (decision 0152's review, L2)", () => {
  it("the call ended with no result here after its claim's reply was lost: sent as the provider's, not held", async () => {
    const client = {
      pageId: "p",
      watchPageCalls: async () => () => {},
      claimPageCall: async () => {
        throw new ConnectionLost();
      },
      answerPageCall: async () => {},
    };
    const chat = new PageChat(client as never, 1, ["t"]);
    const waiting = {
      live: { run: true, tools: [{ callId: "c", name: "t", status: "running", page: { status: "waiting", attempts: 0 } }] },
    } as never;
    chat.claim(waiting, () => {});
    await tick(20);
    const reply = { id: "m", steps: [], tools: new Map() } as never;
    expect(chat.mode(waiting, reply)("c", "t")).toBe("hold");
    const gone = { live: { run: false, tools: [] } } as never;
    chat.claim(gone, () => {});
    expect(chat.mode(gone, reply)("c", "t")).toBe("provider");
  });
});
