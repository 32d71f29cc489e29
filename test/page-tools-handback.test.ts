import { describe, expect, it } from "vitest";
import { memoryArbiter } from "../src/follow/arbiter.ts";
import { Arrival, Departure, type HandOverMessage } from "../src/follow/handover.ts";
import type { LeaseOptions } from "../src/harness.ts";
import {
  createRegistry,
  defineExtension,
  definePageTool,
  Harness,
  MemoryStorage,
  type Storage,
  type ToolResultEntryPayload,
} from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { Link } from "../src/testing/two-places/link.ts";
import { answer, callTool, ScriptedModels, texts, until } from "./agent-support.ts";
import { ctx, flush } from "./support.ts";

// Issue 27 item 5 (decision 0036, with 0028 and 0029): a page tool called while the object holds the lease waits
// durably there; a tab connected to the object claims and answers it through the object, and the call survives the
// hand-over of the lease back to the tab: one claim, one result, nothing interrupted.

const askPerson = (replay: "safe" | "unsafe" = "unsafe") =>
  definePageTool({
    name: "ask_person",
    description: "Ask the person in the page",
    parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
    replay,
  });

async function objectRunsTheTurn(replay: "safe" | "unsafe" = "unsafe") {
  const clock = createManualClock(1_000);
  const arbiter = memoryArbiter({ clock, ttlMs: 5_000 });
  const models = new ScriptedModels([callTool("ask_person", { question: "Which colour?" }, "call_1"), answer("thanks")]);
  const registry = () => createRegistry().install(defineExtension({ name: "page", tools: [askPerson(replay)] }));
  const open = (storage: Storage, lease: LeaseOptions, connectedPages: string[] = []) =>
    Harness.open(storage, { registry: registry(), models: models.api, clock, lease, connectedPages, resume: true }, ctx);
  const objectStorage = new MemoryStorage();
  const object = await open(objectStorage, { place: "object", arbiter });
  const root = await object.root(ctx, { agent: { model: "faux/faux-1" } });
  await root.submit({ type: "input", content: "ask me", requestId: "q" }, ctx);
  await until(() => root.pendingPageCalls().length === 1, "the call waits for a page on the object");
  return { clock, arbiter, models, object, objectStorage, root, open };
}

/** The object hands the lease back to the tab over a link; the tab opens its harness from the pushed log. */
async function handBack(world: Awaited<ReturnType<typeof objectRunsTheTurn>>, connectedPages: string[]) {
  const { clock, arbiter, object, objectStorage, open } = world;
  const link = new Link<HandOverMessage>();
  const tabStorage = new MemoryStorage();
  const arrival = await Arrival.start({
    place: "tab",
    storage: tabStorage,
    arbiter,
    clock,
    send: (message) => link.send("object", message),
    open: (storage, lease) => open(storage, lease, connectedPages),
  });
  link.attach("tab", (message) => arrival.receive(message));
  const mark = await object.handOver(ctx);
  const departure = new Departure({ place: "object", storage: objectStorage, mark, clock, send: (message) => link.send("tab", message) });
  link.attach("object", (message) => departure.receive(message));
  await departure.start();
  for (let round = 0; round < 200 && !departure.done; round++) {
    await flush(2);
    if (!link.step(0, "deliver")) clock.next();
    await link.handled;
  }
  expect(departure.done).toBe(true);
  const tab = (await arrival.harness)!;
  expect(tab.lease).toMatchObject({ place: "tab", epoch: 2 });
  return { tab, tabRoot: await tab.root(ctx) };
}

async function results(harness: Harness) {
  const root = await harness.root(ctx);
  return (await root.entries(ctx))
    .filter((entry) => entry.kind === "pi.tool-result")
    .map((entry) => texts((entry.payload as unknown as ToolResultEntryPayload).message));
}

describe("a page tool while the object holds the lease, and the hand-over back (decision 0036)", () => {
  it("S8 §4c claimed by the tab's page through the object, answered at the tab after the hand-over: one result, not interrupted", async () => {
    const world = await objectRunsTheTurn();
    // The tab's page is connected to the object: it claims the call there.
    const claim = await world.root.claimPageCall("call_1", { claimId: "k1", pageId: "page-1" }, ctx);
    expect(claim.claimId).toBe("k1");
    // The lease goes back to the tab; its page stays connected across the hand-over, so its claim holds.
    const { tab, tabRoot } = await handBack(world, ["page-1"]);
    expect(tabRoot.pendingPageCalls()).toMatchObject([{ callId: "call_1", status: "claimed" }]);
    await tabRoot.answerPageCall("call_1", "k1", "blue", ctx);
    const [submission] = await tab.storage.listSubmissions(tabRoot.id);
    await (await tab.submission(submission!.id, ctx)).wait(ctx);
    expect(await results(tab)).toEqual([["blue"]]);
    await tab.close(ctx);
  });

  it("S8 §4c a call still waiting for a page when the lease comes back waits at the tab, is claimed and answered there once", async () => {
    const world = await objectRunsTheTurn();
    const { tab, tabRoot } = await handBack(world, []);
    expect(tabRoot.pendingPageCalls()).toMatchObject([{ callId: "call_1", status: "waiting" }]);
    await tabRoot.claimPageCall("call_1", { claimId: "k2", pageId: "page-2" }, ctx);
    await tabRoot.answerPageCall("call_1", "k2", "green", ctx);
    const [submission] = await tab.storage.listSubmissions(tabRoot.id);
    await (await tab.submission(submission!.id, ctx)).wait(ctx);
    expect(await results(tab)).toEqual([["green"]]);
    // The object that handed over writes nothing more: a late answer there is refused.
    await expect(world.root.answerPageCall("call_1", "k2", "late", ctx)).rejects.toThrow();
    await tab.close(ctx);
  });

  it("S8 §4c a claim whose page is gone at the hand-over back is released at the tab's open: unsafe ends interrupted, safe waits again", async () => {
    for (const replay of ["unsafe", "safe"] as const) {
      const world = await objectRunsTheTurn(replay);
      await world.root.claimPageCall("call_1", { claimId: "k1", pageId: "page-1" }, ctx);
      const { tab, tabRoot } = await handBack(world, []);
      if (replay === "safe") {
        await until(() => tabRoot.pendingPageCalls()[0]?.status === "waiting", "the safe call waits for a page again");
        await expect(tabRoot.answerPageCall("call_1", "k1", "stale", ctx)).rejects.toThrow(/claim/i);
      } else {
        await until(async () => (await results(tab)).length === 1, "the unsafe call ends");
        expect((await results(tab))[0]!.join("")).toMatch(/was interrupted while a page ran it .* and may have partially run/);
      }
      await tab.close(ctx);
    }
  });
});
