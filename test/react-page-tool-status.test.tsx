// @vitest-environment happy-dom
import { act, cleanup, renderHook, waitFor } from "@testing-library/react";
import fc from "fast-check";
import type { ReactNode } from "react";
import { afterEach, describe, expect, it } from "vitest";
import { HostClient } from "../src/host/client.ts";
import { type HostEndpoint, hostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import type { Ownership } from "../src/host/ownership.ts";
import type { PageToolImplementation } from "../src/host/page-tools.ts";
import type { HarnessStatus } from "../src/host/status.ts";
import { createRegistry, defineExtension, definePageTool, MemoryStorage, type ToolResultEntryPayload } from "../src/index.ts";
import { HarnessProvider, usePageTool } from "../src/react/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { answer, callTool, ScriptedModels, until } from "./agent-support.ts";
import { OneOwner } from "./one-owner.ts";

// Decision 0150: usePageTool keeps its provision — and the calls it runs — across a status that is not a loss (a
// socket reconnecting, the host opening again, a database move the transport carries the watch across). A call whose
// claim really went (the harness that granted it stopped, the next one released it) leaves `requests` when the host's
// list says so, and follows its replay policy; an unsafe call never runs twice. Before, every status but `ready` let
// the tools go: the running call's form vanished and its claim was released (an unsafe one ended interrupted).

afterEach(cleanup);

const ARGS = { question: "Which colour?" };

/** A page's real client whose transport shows its own statuses for a while (as a socket's drop, a move, does). */
class BlinkingClient extends HostClient {
  blink(status: HarnessStatus): void {
    this.transportStatus(status, true);
  }
  /** The transport's status is over: the host's own is shown again. */
  over(): void {
    this.hostStatusAgain();
  }
  /** The worker is gone for good (terminated, crashed). */
  die(): void {
    this.gone("The database worker was terminated.");
  }
}

/**
 * An endpoint that carries its subscriptions to the place the database moved to (as the tabs' endpoint does): `move`
 * ends each at the old place and asks it at the new one. The old place's `HarnessClosed` at its close is a move, not
 * a refusal.
 */
function carrying(first: HostEndpoint) {
  let at = first;
  let lastId = 0;
  type Held = { method: string; args: unknown[]; emit: (value: unknown) => void; on: HostEndpoint; remote: Promise<number> };
  const held = new Map<number, Held>();
  const ask = (subscription: Omit<Held, "remote">, lost?: (error: Error) => void) =>
    subscription.on.subscribe(subscription.method, subscription.args, subscription.emit, (error) => {
      if (error.name !== "HarnessClosed") lost?.(error);
    });
  const endpoint: HostEndpoint = {
    call: (method, args) => at.call(method, args),
    async subscribe(method, args, emit, lost) {
      const id = ++lastId;
      const subscription = { method, args, emit, on: at };
      held.set(id, { ...subscription, remote: ask(subscription, lost) });
      await held.get(id)!.remote;
      return id;
    },
    unsubscribe(id) {
      const subscription = held.get(id);
      held.delete(id);
      void subscription?.remote.then((remote) => subscription.on.unsubscribe(remote)).catch(() => {});
    },
  };
  const move = (next: HostEndpoint) => {
    at = next;
    for (const [id, subscription] of held) {
      void subscription.remote.then((remote) => subscription.on.unsubscribe(remote)).catch(() => {});
      const moved = { method: subscription.method, args: subscription.args, emit: subscription.emit, on: next };
      held.set(id, { ...moved, remote: ask(moved) });
    }
  };
  return { endpoint, move };
}

/** A tab's host of the database `image` (its close keeps the image for the next tab's host). */
function tabHost(
  replay: "safe" | "unsafe",
  models: ScriptedModels,
  saved: { image?: Uint8Array },
  lock?: { ownership: Ownership; failOpen?: true },
) {
  const clock = createManualClock(1_000);
  const tool = definePageTool({
    name: "ask_person",
    description: "Ask the person",
    parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
    replay,
  });
  return createHost({
    database: "db",
    openStorage: async () => {
      if (lock?.failOpen) throw new Error("this tab's storage does not open");
      const inner = saved.image ? MemoryStorage.fromImage(saved.image) : new MemoryStorage();
      const close = inner.close.bind(inner);
      inner.close = async () => {
        saved.image = await inner.exportImage();
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
    now: () => clock.now(),
    ...(lock ? { ownership: lock.ownership } : {}),
  });
}

async function toolResults(client: HostClient, conversationId: number): Promise<ToolResultEntryPayload[]> {
  const view = await client.openConversation(conversationId);
  const results = view.state.entries.filter((entry) => entry.kind === "pi.tool-result");
  view.close();
  return results.map((entry) => entry.payload as unknown as ToolResultEntryPayload);
}

async function world(replay: "safe" | "unsafe" = "unsafe", lock?: OneOwner) {
  const models = new ScriptedModels([callTool("ask_person", ARGS, "call_1"), answer("thanks")]);
  const saved: { image?: Uint8Array } = {};
  const a = tabHost(replay, models, saved, lock ? { ownership: lock.ownership("a") } : undefined);
  await a.ready;
  const link = carrying(hostEndpoint(a.service));
  const client = new BlinkingClient(link.endpoint, "p1");
  await client.ready();
  const conversationId = await client.rootConversation({ model: "faux/faux-1" });
  const wrapper = ({ children }: { children: ReactNode }) => <HarnessProvider client={client as never}>{children}</HarnessProvider>;
  return { models, saved, a, link, client, conversationId, wrapper };
}

const OPENING: HarnessStatus = { kind: "opening", database: "db" };
const RECONNECTING: HarnessStatus = { kind: "reconnecting", attempt: 1, retryInMs: 250 };

describe("usePageTool across status changes (decision 0150)", () => {
  it("S8 §4c: the status blinks ready → opening → ready → reconnecting → ready on the same harness: the running call's form stays, its answer is the one result (before: the form went and the unsafe call ended interrupted)", async () => {
    const { client, conversationId, wrapper } = await world();
    const { result } = renderHook(() => usePageTool(conversationId, "ask_person"), { wrapper });
    const submission = await client.submit(conversationId, { type: "input", content: "ask me" });
    await waitFor(() => expect(result.current).toHaveLength(1));
    for (const status of [OPENING, RECONNECTING]) {
      act(() => client.blink(status));
      await until(async () => (await client.inspect()).pageCalls.length > 0, "the call is listed");
      expect(result.current).toMatchObject([{ callId: "call_1", attempt: 1 }]);
      act(() => client.over());
      expect(client.status.kind).toBe("ready");
      expect(result.current).toMatchObject([{ callId: "call_1", attempt: 1 }]);
    }
    expect((await client.inspect()).pageCalls).toMatchObject([{ callId: "call_1", status: "claimed" }]);
    act(() => result.current[0]!.respond!("green"));
    expect(await client.waitForSubmission(submission)).toMatchObject({ status: "done" });
    await waitFor(() => expect(result.current).toEqual([]));
    const results = await toolResults(client, conversationId);
    expect(results.map((entry) => [entry.code, entry.message.content])).toEqual([[undefined, [{ type: "text", text: "green" }]]]);
  });

  it("S4 S8 §4c: the host opens its harness again and keeps the claims of the pages still watching (a takeover whose taker never opened, 0140's review M1): the page sees its host's own statuses leave ready and come back, keeps its form, and its answer is the one result (before: the hook let go, the reopen released the claim, the call ended interrupted)", async () => {
    const lock = new OneOwner();
    const { models, saved, client, conversationId, wrapper } = await world("unsafe", lock);
    const statuses: string[] = [];
    client.onStatus((status) => void statuses.push(status.kind));
    const { result } = renderHook(() => usePageTool(conversationId, "ask_person"), { wrapper });
    const submission = await client.submit(conversationId, { type: "input", content: "ask me" });
    await waitFor(() => expect(result.current).toHaveLength(1));
    const b = tabHost("unsafe", models, saved, { ownership: lock.ownership("b"), failOpen: true });
    await until(() => lock.queue.length === 1, "b waits for the lock");
    await act(async () => {
      b.service.requestTakeover();
      await until(() => b.service.status().kind === "failed", "b's open fails");
      await until(() => statuses.length > 2 && client.status.kind === "ready", "a is ready again");
    });
    expect(statuses[0]).toBe("ready");
    expect(statuses.slice(1, -1)).not.toContain("ready");
    expect(statuses.length).toBeGreaterThan(2);
    expect(result.current).toMatchObject([{ callId: "call_1", attempt: 1 }]);
    act(() => result.current[0]!.respond!("green"));
    expect(await client.waitForSubmission(submission)).toMatchObject({ status: "done" });
    const results = await toolResults(client, conversationId);
    expect(results.map((entry) => [entry.code, entry.message.content])).toEqual([[undefined, [{ type: "text", text: "green" }]]]);
  });

  for (const replay of ["unsafe", "safe"] as const) {
    it(`S8 §4c: the database really moves (its tab closes, the next tab's open releases the claim; ${replay}): the form stays until the host says so, then goes; ${replay === "unsafe" ? "the call ends interrupted, never run again" : "the call runs again here (attempt 2), its answer the one result"}`, async () => {
      const { models, saved, a, link, client, conversationId, wrapper } = await world(replay);
      const shown: string[] = [];
      const { result } = renderHook(
        () => {
          const requests = usePageTool(conversationId, "ask_person");
          for (const request of requests)
            if (!shown.includes(`${request.callId}#${request.attempt}`)) shown.push(`${request.callId}#${request.attempt}`);
          return requests;
        },
        { wrapper },
      );
      const submission = await client.submit(conversationId, { type: "input", content: "ask me" });
      await waitFor(() => expect(result.current).toHaveLength(1));
      // The page shows the move (its tab's worker lets the database go, the next opens it).
      act(() => client.blink(OPENING));
      await a.service.close();
      expect(result.current).toMatchObject([{ callId: "call_1", attempt: 1 }]); // the host has not said the claim went
      const b = tabHost(replay, models, saved);
      await b.ready;
      await act(async () => {
        link.move(hostEndpoint(b.service));
        await until(() => client.status.kind === "opening" || client.status.kind === "ready", "the status moved");
        client.over();
      });
      if (replay === "unsafe") {
        await waitFor(() => expect(result.current).toEqual([]));
        expect(await client.waitForSubmission(submission)).toMatchObject({ status: "done" });
        const results = await toolResults(client, conversationId);
        expect(results.map((entry) => entry.code)).toEqual(["interrupted"]);
        expect(shown).toEqual(["call_1#1"]);
      } else {
        await waitFor(() => expect(result.current).toMatchObject([{ callId: "call_1", attempt: 2 }]));
        act(() => result.current[0]!.respond!("green"));
        expect(await client.waitForSubmission(submission)).toMatchObject({ status: "done" });
        await waitFor(() => expect(result.current).toEqual([]));
        const results = await toolResults(client, conversationId);
        expect(results.map((entry) => entry.message.content)).toEqual([[{ type: "text", text: "green" }]]);
        expect(shown).toEqual(["call_1#1", "call_1#2"]);
      }
      await b.service.close();
    });
  }

  it("property (S8): over random status sequences on the same harness the unsafe call runs once; it keeps its form and its answer is the result unless the client ended for good (closed by the page, its worker gone) — then the form goes and the call ends interrupted, once", async () => {
    const blinks = fc.constantFrom<HarnessStatus>(
      OPENING,
      { kind: "recovering", database: "db" },
      RECONNECTING,
      { kind: "reconnecting", attempt: 2, retryInMs: 500 },
      { kind: "failed", error: { name: "NotAuthorized", message: "no" } },
      { kind: "waiting-for-lock", database: "db" },
      { kind: "closed", reason: "takeover" },
    );
    const step = fc.oneof(
      blinks.map((status) => ({ blink: status })),
      fc.constant({ over: true as const }),
    );
    const end = fc.constantFrom<"none" | "close" | "gone">("none", "none", "close", "gone");
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 8 }), end, async (steps, ending) => {
        const { a, client, conversationId, wrapper } = await world();
        let runs = 0;
        let finish: (result: string) => void = () => {};
        const implementation: PageToolImplementation = () => {
          runs++;
          return new Promise<string>((resolve) => (finish = resolve));
        };
        const { result, unmount } = renderHook(() => usePageTool(conversationId, "ask_person", implementation), { wrapper });
        const submission = await client.submit(conversationId, { type: "input", content: "ask me" });
        await waitFor(() => expect(result.current).toHaveLength(1));
        for (const next of steps) {
          act(() => ("blink" in next ? client.blink(next.blink) : client.over()));
          await until(async () => (await client.inspect()).pageCalls.length > 0, "the call is listed");
          expect(result.current).toMatchObject([{ callId: "call_1", attempt: 1 }]);
        }
        act(() => client.over());
        if (ending === "close") act(() => client.blink({ kind: "closed", reason: "close" }));
        if (ending === "gone") act(() => client.die());
        if (ending === "none") {
          expect(result.current).toMatchObject([{ callId: "call_1", attempt: 1 }]);
          act(() => finish("green"));
          expect(await client.waitForSubmission(submission)).toMatchObject({ status: "done" });
          await waitFor(() => expect(result.current).toEqual([]));
          const results = await toolResults(client, conversationId);
          expect(results.map((entry) => [entry.code, entry.message.content])).toEqual([[undefined, [{ type: "text", text: "green" }]]]);
        } else {
          expect(result.current).toEqual([]);
          // The page's watch ended with the client: the host released its claim, the unsafe call ended interrupted, and
          // the run's late answer is sent nowhere (read by another page of the same host).
          act(() => finish("late"));
          const reader = new HostClient(hostEndpoint(a.service), "reader");
          expect(await reader.waitForSubmission(submission)).toMatchObject({ status: "done" });
          const results = await toolResults(reader, conversationId);
          expect(results.map((entry) => entry.code)).toEqual(["interrupted"]);
        }
        expect(runs).toBe(1);
        unmount();
      }),
      { numRuns: 25 },
    );
  });
});
