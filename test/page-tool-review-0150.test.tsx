// @vitest-environment happy-dom
import { act, cleanup, renderHook, waitFor } from "@testing-library/react";
import type { ReactNode } from "react";
import { afterEach, describe, expect, it } from "vitest";
import { HostClient } from "../src/host/client.ts";
import { type HostEndpoint, hostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import type { PageToolImplementation } from "../src/host/page-tools.ts";
import type { HarnessStatus } from "../src/host/status.ts";
import { createRegistry, defineExtension, definePageTool, MemoryStorage, type ToolResultEntryPayload } from "../src/index.ts";
import { type DurableUIMessage, HarnessProvider, usePageTool } from "../src/react/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { answer, callTool, createWorld, openAgent, ScriptedModels, until } from "./agent-support.ts";
import { transportFor } from "./react-support.ts";

// Decision 0150's review. M1: a provision that stopped while its claim was in flight never runs the call nor shows its
// form, and two provisions in one page (React StrictMode's second effect, two components) claim as two pages, so the
// second's claim is never taken for a retry of the first's: an unsafe tool runs at most once (S8). L1: a worker that
// goes after `closed takeover` is told, and the hook lets its forms go.

afterEach(cleanup);

const ARGS = { question: "Which colour?" };

/** A page's real client whose transport shows its own statuses on purpose. */
class TestClient extends HostClient {
  blink(status: HarnessStatus): void {
    this.transportStatus(status, true);
  }
  /** The worker is gone for good (terminated, crashed). */
  die(): void {
    this.gone("The database worker was terminated.");
  }
}

function host(replay: "safe" | "unsafe") {
  const clock = createManualClock(1_000);
  const tool = definePageTool({
    name: "ask_person",
    description: "Ask the person",
    parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
    replay,
  });
  return createHost({
    database: "db",
    openStorage: async () => new MemoryStorage(),
    harness: {
      registry: createRegistry().install(defineExtension({ name: "page", tools: [tool] })),
      clock,
      models: new ScriptedModels([callTool("ask_person", ARGS, "call_1"), answer("thanks")]).api,
      resume: true,
    },
    now: () => clock.now(),
  });
}

/** An endpoint whose claims commit at the host but whose answers wait for `open()` (a claim in flight). */
function holdingClaims(inner: HostEndpoint) {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let claimsSent = 0;
  const endpoint: HostEndpoint = {
    call: async (method, args) => {
      if (method !== "claimPageCall") return inner.call(method, args);
      claimsSent++;
      const out = await inner.call(method, args);
      await gate;
      return out;
    },
    subscribe: (method, args, emit, lost) => inner.subscribe(method, args, emit, lost),
    unsubscribe: (id) => inner.unsubscribe(id),
  };
  return { endpoint, open, claimsSent: () => claimsSent };
}

async function world(replay: "safe" | "unsafe" = "unsafe", wrap: (inner: HostEndpoint) => HostEndpoint = (inner) => inner) {
  const h = host(replay);
  await h.ready;
  const client = new TestClient(wrap(hostEndpoint(h.service)), "p1");
  await client.ready();
  const conversationId = await client.rootConversation({ model: "faux/faux-1" });
  const reader = new HostClient(hostEndpoint(h.service), "reader");
  const wrapper = ({ children }: { children: ReactNode }) => <HarnessProvider client={client as never}>{children}</HarnessProvider>;
  const results = async () => {
    const view = await reader.openConversation(conversationId);
    const entries = view.state.entries.filter((entry) => entry.kind === "pi.tool-result");
    view.close();
    return entries.map((entry) => {
      const payload = entry.payload as unknown as ToolResultEntryPayload;
      return payload.code ?? String((payload.message.content as Array<{ text?: string }>)[0]?.text);
    });
  };
  return { client, reader, conversationId, wrapper, results };
}

/** An implementation that records each start: whether its signal was already aborted, and its attempt. */
function recording() {
  const starts: Array<{ aborted: boolean; attempt: number }> = [];
  const implementation: PageToolImplementation = async (_args, call) => {
    starts.push({ aborted: call.signal.aborted, attempt: call.attempt });
    return "green";
  };
  return { starts, implementation };
}

describe("usePageTool after decision 0150's review (M1: a stopped provision never runs; one claimant per provision)", () => {
  it("StrictMode with an unsafe call waiting at mount: the implementation runs at most once, never under an aborted signal, and the call has one result (S8)", async () => {
    const { client, conversationId, wrapper, results } = await world("unsafe");
    const submission = await client.submit(conversationId, { type: "input", content: "ask me" });
    await until(async () => (await client.inspect()).pageCalls.length > 0, "the call listed");
    const { starts, implementation } = recording();
    renderHook(() => usePageTool(conversationId, "ask_person", implementation), { wrapper, reactStrictMode: true });
    expect(await client.waitForSubmission(submission)).toMatchObject({ status: "done" });
    expect(starts.filter((start) => start.aborted)).toEqual([]);
    expect(starts.length).toBeLessThanOrEqual(1);
    // Ran once (its answer is the result) or not at all (the first provision's claim was released: interrupted).
    expect(await results()).toEqual([starts.length === 1 ? "green" : "interrupted"]);
  });

  it("StrictMode with a safe call waiting at mount: it runs once, at the provision that stayed, and its answer is the one result", async () => {
    const { client, conversationId, wrapper, results } = await world("safe");
    const submission = await client.submit(conversationId, { type: "input", content: "ask me" });
    await until(async () => (await client.inspect()).pageCalls.length > 0, "the call listed");
    const { starts, implementation } = recording();
    renderHook(() => usePageTool(conversationId, "ask_person", implementation), { wrapper, reactStrictMode: true });
    expect(await client.waitForSubmission(submission)).toMatchObject({ status: "done" });
    expect(starts.map((start) => start.aborted)).toEqual([false]);
    expect(await results()).toEqual(["green"]);
  });

  it("two components of one page provide the same unsafe tool: one of them runs it, once (S8)", async () => {
    const { client, conversationId, wrapper, results } = await world("unsafe");
    const { starts, implementation } = recording();
    renderHook(
      () => {
        usePageTool(conversationId, "ask_person", implementation);
        usePageTool(conversationId, "ask_person", implementation);
      },
      { wrapper },
    );
    const submission = await client.submit(conversationId, { type: "input", content: "ask me" });
    expect(await client.waitForSubmission(submission)).toMatchObject({ status: "done" });
    expect(starts).toEqual([{ aborted: false, attempt: 1 }]);
    expect(await results()).toEqual(["green"]);
  });

  it("unmounted while its claim is in flight: the implementation never starts and the unsafe call ends interrupted once (S8)", async () => {
    let held!: ReturnType<typeof holdingClaims>;
    const { client, conversationId, wrapper, results } = await world("unsafe", (inner) => (held = holdingClaims(inner)).endpoint);
    const { starts, implementation } = recording();
    const { unmount } = renderHook(() => usePageTool(conversationId, "ask_person", implementation), { wrapper });
    const submission = await client.submit(conversationId, { type: "input", content: "ask me" });
    await until(async () => (await client.inspect()).pageCalls.some((call) => call.status === "claimed"), "the claim committed");
    unmount();
    held.open();
    expect(await client.waitForSubmission(submission)).toMatchObject({ status: "done" });
    await until(async () => held.claimsSent() === 1 && (await results()).length === 1, "the result");
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(starts).toEqual([]);
    expect(await results()).toEqual(["interrupted"]);
  });

  it("a form whose client was closed while its claim was in flight is never shown; the unsafe call ends interrupted once", async () => {
    let held!: ReturnType<typeof holdingClaims>;
    const { client, reader, conversationId, wrapper, results } = await world("unsafe", (inner) => (held = holdingClaims(inner)).endpoint);
    const { result } = renderHook(() => usePageTool(conversationId, "ask_person"), { wrapper });
    const submission = await client.submit(conversationId, { type: "input", content: "ask me" });
    await until(async () => (await client.inspect()).pageCalls.some((call) => call.status === "claimed"), "the claim committed");
    act(() => client.blink({ kind: "closed", reason: "close" }));
    await act(async () => {
      held.open();
      await new Promise((resolve) => setTimeout(resolve, 0));
    });
    await until(async () => (await results()).length === 1, "the result");
    // The claim's answer has come back (ordered after the release on this endpoint) and a few turns have passed.
    for (let i = 0; i < 5; i++) await act(() => new Promise((resolve) => setTimeout(resolve, 0)));
    expect(result.current).toEqual([]);
    expect(await results()).toEqual(["interrupted"]);
    expect(await reader.waitForSubmission(submission)).toMatchObject({ status: "done" });
  });
});

describe("usePageTool after decision 0150's review (L1: the worker gone after a takeover)", () => {
  it("closed by a takeover, then the worker goes: the client says WorkerGone and the hook lets its form go", async () => {
    const { client, conversationId, wrapper } = await world("unsafe");
    const { result } = renderHook(() => usePageTool(conversationId, "ask_person"), { wrapper });
    await client.submit(conversationId, { type: "input", content: "ask me" });
    await waitFor(() => expect(result.current).toHaveLength(1));
    act(() => client.blink({ kind: "closed", reason: "takeover" }));
    expect(result.current).toHaveLength(1); // a takeover alone is not an end (decision 0150)
    act(() => client.die());
    expect(client.status).toMatchObject({ kind: "failed", error: { name: "WorkerGone" } });
    expect(result.current).toEqual([]);
  });

  it("closed by the page, then the worker goes: the status stays closed", async () => {
    const { client } = await world("unsafe");
    client.blink({ kind: "closed", reason: "close" });
    client.die();
    expect(client.status).toEqual({ kind: "closed", reason: "close" });
  });
});

describe("useChat's page tools after decision 0150's review (one claimant per chat)", () => {
  for (const [how, pages] of [
    ["in the same page (two useChat of one conversation, a remount)", ["tab-a", "tab-a"]],
    ["in two tabs (the loser's stream no longer holds the part for good)", ["tab-a", "tab-b"]],
  ] as const)
    it(`two chats that both see the call waiting, ${how}: only one gets it as its own to run, the other's stream goes on (S8)`, async () => {
      const tool = definePageTool({
        name: "ask_person",
        description: "Ask the person",
        parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
      });
      const models = new ScriptedModels([callTool("ask_person", ARGS, "call-1"), answer("Green it is.")]);
      const agent = await openAgent(new MemoryStorage(), { models, world: createWorld(), tools: [tool] });
      const a = transportFor(agent, { pageTools: ["ask_person"], pageId: pages[0] });
      const b = transportFor(agent, { pageTools: ["ask_person"], pageId: pages[1] });
      const user: DurableUIMessage = { id: "m1", role: "user", parts: [{ type: "text", text: "ask me" }] };
      const streamA = await a.sendMessages({
        trigger: "submit-message",
        chatId: "chat",
        messageId: undefined,
        messages: [user],
        abortSignal: undefined,
      });
      // Both streams watch before the call waits: both see it waiting and both claim it.
      const streamB = (await b.reconnectToStream({ chatId: "chat" }))!;
      const toolPart = async (stream: ReadableStream) => {
        const reader = stream.getReader();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) return undefined;
          if (value.type === "tool-input-available") {
            void reader.cancel();
            return value as { providerExecuted?: boolean };
          }
        }
      };
      const parts = await Promise.all([toolPart(streamA), toolPart(streamB)]);
      // `providerExecuted: false` is the one onToolCall runs: exactly one of the two chats.
      expect(parts.map((part) => part?.providerExecuted).sort()).toEqual([false, true]);
      a.close();
      b.close();
    }, 5_000);
});
