import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HarnessClient } from "../../src/browser/client.ts";
import { followObject } from "../../src/browser/follow.ts";
import { createHost } from "../../src/host/host.ts";
import { createRegistry, defineExtension, definePageTool, type ToolResultEntryPayload } from "../../src/index.ts";
import { openSqliteStorage } from "../../src/storage/sqlite/open-storage.ts";
import type { SqliteStorage } from "../../src/storage/sqlite/storage.ts";
import { pageOf } from "../page-tools-follow-support.ts";
import { until } from "./follow-support.ts";
import { type Edge, edgeSocket, pause, startEdge } from "./support.ts";

// Issue 27 item 5, decision 0044, in workerd: the object (test/edge/approval-object.ts, a `follow-page-…` object)
// runs a turn whose page tool `ask_person` waits there; a Node-side tab — the worker's own host and follow link
// (`followObject`) over a real socket to the object's `/follow` — follows it read-only and its page claims and
// answers the call at the object (`page-calls`). The tab's socket closing is the object's `webSocketClose`.

const askPerson = definePageTool({
  name: "ask_person",
  description: "Ask the person in the page",
  parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
  replay: "unsafe",
});

/** The tab's storage as each load's host opens it: a host's close does not close it (the next load reopens it, as OPFS would). */
function kept(storage: SqliteStorage): SqliteStorage {
  return new Proxy(storage, {
    get(target, key) {
      if (key === "close") return async () => {};
      const value = Reflect.get(target, key, target) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** One load of the tab's worker on `storage`, following object `name`. */
function loadTab(edge: Edge, name: string, storage: SqliteStorage) {
  const follow = followObject({
    url: `ws://edge/approval/${name}/follow`,
    connect: () => edgeSocket(edge, "approval", name, {}, "/follow"),
  });
  const host = createHost({
    database: "tab",
    openStorage: async () => kept(storage),
    harness: { registry: createRegistry().install(defineExtension({ name: "approvals", tools: [askPerson] })), lease: follow.lease },
    onReady: (harness) => follow.attach(harness),
    leave: (handedOver) => follow.leave(handedOver),
    takeBack: () => follow.takeBack(),
    pageCallsElsewhere: () => follow.pageCalls,
    now: () => performance.now(),
  });
  return { follow, host, service: host.service };
}

/** Longer than workerd's 10 s of inactivity before it evicts an object, with room for a loaded machine. */
const EVICTED_AFTER_MS = 16_000;

type State = { tasks: Array<{ kind: string; state: { status: string } }>; entries: Array<{ kind: string; payload: unknown }> };

/** The tab holds the lease first, then leaves (the object takes over); a page of the object submits "ask me". */
async function objectAsks(edge: Edge, name: string) {
  const storage = await openSqliteStorage({ vfs: "memory" });
  const first = loadTab(edge, name, storage);
  await first.host.ready;
  expect(first.service.status()).toMatchObject({ kind: "ready", runs: "here" });
  await first.service.rootConversation({ model: "faux/faux-1" });
  const page = new HarnessClient({ url: `ws://edge/approval/${name}`, connect: () => edgeSocket(edge, "approval", name) });
  await page.ready();
  first.service.leave();
  await until("the object holds the lease", () => (page.status.kind === "ready" && page.status.runs === "here" ? true : undefined));
  first.follow.close();
  const conversation = await page.rootConversation();
  const submission = await page.submit(conversation, { type: "input", content: "ask me", requestId: "q" });
  await until("the call waits at the object", async () =>
    (await page.inspect()).pageCalls.some((call) => call.status === "waiting") ? true : undefined,
  );
  const state = () => edge.json<State>("approval", name, "/state");
  const results = async () =>
    (await state()).entries.filter((entry) => entry.kind === "pi.tool-result").map((entry) => entry.payload as ToolResultEntryPayload);
  return { storage, page, conversation, submission, results };
}

describe("page tools while the object runs, in workerd (issue 27 item 5, decision 0044)", () => {
  let edge: Edge;
  beforeAll(async () => {
    edge = await startEdge();
  }, 120_000);
  afterAll(async () => {
    await edge?.dispose();
  });

  it("§4c S8: a tab that follows the running object claims and answers its page call over the follow socket: one run, one result, the object's turn ends", async () => {
    const world = await objectAsks(edge, "follow-page-answer");
    const tab = loadTab(edge, "follow-page-answer", world.storage);
    await tab.host.ready;
    expect(tab.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
    await until("the tab's copy has the call", async () => ((await tab.service.inspect()).pageCalls.length === 1 ? true : undefined));
    const runs: string[] = [];
    const errors: unknown[] = [];
    await pageOf(tab.service, "tab-page").providePageTools(
      world.conversation,
      {
        ask_person: ({ question }) => {
          runs.push(String(question));
          return "green";
        },
      },
      { onError: (error) => errors.push(error) },
    );
    expect(await world.page.waitForSubmission(world.submission)).toMatchObject({ status: "done" });
    expect(runs).toEqual(["colour?"]);
    expect(errors).toEqual([]);
    const results = await world.results();
    expect(results).toHaveLength(1);
    expect(results[0]!.message.content).toEqual([{ type: "text", text: "green" }]);
    expect((await edge.json<State>("approval", "follow-page-answer", "/state")).entries.at(-1)).toMatchObject({ kind: "pi.assistant" });
    await tab.service.close();
    tab.follow.close();
    world.page.close();
  }, 60_000);

  it("§4c S8: the tab reloads while its page runs the unsafe call (its follow socket closes): the object writes the interrupted result once; the reloaded tab never runs it again", async () => {
    const world = await objectAsks(edge, "follow-page-reload");
    const tab = loadTab(edge, "follow-page-reload", world.storage);
    await tab.host.ready;
    await until("the tab's copy has the call", async () => ((await tab.service.inspect()).pageCalls.length === 1 ? true : undefined));
    let started = 0;
    await pageOf(tab.service, "tab-page").providePageTools(world.conversation, {
      ask_person: () => {
        started++;
        return new Promise<string>(() => {});
      },
    });
    await until("the tab's page runs the call", () => (started === 1 ? true : undefined));
    tab.follow.close(); // the reload: the worker and its follow socket go
    expect(await world.page.waitForSubmission(world.submission)).toMatchObject({ status: "done" });
    const results = await world.results();
    expect(results.map((result) => result.code)).toEqual(["interrupted"]);
    // The reloaded tab follows, provides the tool again, and runs nothing: the call ended.
    await tab.service.close(); // the dead worker's read-only harness (it wrote nothing), so the next load can open
    const again = loadTab(edge, "follow-page-reload", world.storage);
    await again.host.ready;
    await pageOf(again.service, "tab-page-2").providePageTools(world.conversation, {
      ask_person: () => {
        started++;
        return "again";
      },
    });
    await until("the reloaded tab's copy has the result", async () =>
      (await again.service.conversationEntries(world.conversation, Number.MAX_SAFE_INTEGER, 100)).entries.some(
        (entry) => entry.kind === "pi.tool-result",
      )
        ? true
        : undefined,
    );
    expect(started).toBe(1);
    expect(await world.results()).toHaveLength(1);
    await again.service.close();
    again.follow.close();
    world.page.close();
  }, 60_000);

  it("0051/0052 §4c S8: the object is idle-evicted while the tab's page runs a call it claimed through its follow socket: the new instance keeps the claim and the page's answer is the call's one result", async () => {
    const name = "follow-page-evicted";
    const world = await objectAsks(edge, name);
    const tab = loadTab(edge, name, world.storage);
    await tab.host.ready;
    await until("the tab's copy has the call", async () => ((await tab.service.inspect()).pageCalls.length === 1 ? true : undefined));
    let answer: ((value: string) => void) | undefined;
    await pageOf(tab.service, "tab-page").providePageTools(world.conversation, {
      ask_person: () => new Promise<string>((resolve) => (answer = resolve)),
    });
    await until("the tab's page runs the call it claimed at the object", () => (answer ? true : undefined));
    world.page.close(); // only the tab's hibernatable follow socket stays open
    const first = (await edge.json<{ instance: string }>("approval", name, "/state")).instance;
    // Nothing reaches the object for longer than workerd's 10 s of inactivity: it is evicted (decision 0052: the
    // waiting turn is neither ready nor running, so its timers are parked and none holds it in memory).
    await pause(EVICTED_AFTER_MS);
    answer!("green"); // reaches the object's next instance through the same follow socket
    await until("the object's turn ends", async () =>
      (await edge.json<State>("approval", name, "/state")).entries.at(-1)?.kind === "pi.assistant" ? true : undefined,
    );
    const after = await edge.json<State & { instance: string }>("approval", name, "/state");
    expect(after.instance).not.toBe(first); // a new instance answered (the first was evicted)
    const results = await world.results();
    expect(results.map((result) => result.message.content)).toEqual([[{ type: "text", text: "green" }]]); // before 0051: interrupted
    expect(after.tasks.filter((task) => task.kind === "pi.tool").map((task) => task.state.status)).toEqual(["terminal"]);
    await tab.service.close();
    tab.follow.close();
  }, 90_000);
});
