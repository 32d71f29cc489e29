import { describe, expect, it } from "vitest";
import { followObject } from "../src/browser/follow.ts";
import { objectCopy } from "../src/cloudflare/follow-copy.ts";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, defineExtension, definePageTool, Harness, type Storage } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { answer, callTool, ScriptedModels, texts } from "./agent-support.ts";
import { pageOf, resultsAt, sees, socketTo } from "./page-tools-follow-support.ts";
import { ctx } from "./support.ts";

// Issue 27 item 5, decision 0044, the other way: the tab holds the lease and runs the conversation; a device's page
// at the object's copy (objectCopy, as a following Durable Object serves it) claims and answers the tab's page call,
// forwarded to the tab over its follow socket (topic `device-page-calls`), and the tab commits it once.

const askPerson = (replay: "safe" | "unsafe") =>
  definePageTool({
    name: "ask_person",
    description: "Ask the person in the page",
    parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
    replay,
  });

async function tabRuns(replay: "safe" | "unsafe") {
  const models = new ScriptedModels([callTool("ask_person", { question: "Which colour?" }, "call_1"), answer("thanks")]);
  const registry = () => createRegistry().install(defineExtension({ name: "page", tools: [askPerson(replay)] }));
  let record: LeaseRecord = { epoch: 0 };
  const book = new LeaseBook({ clock: { now: () => Date.now() }, ttlMs: 60_000, load: () => record, save: (next) => void (record = next) });
  const copyStorage = openSqliteStorage({ vfs: "memory" });
  let started: Promise<ObjectEnd> | undefined;
  const copied = objectCopy({
    database: "copy",
    storage: copyStorage,
    harness: { registry: registry() },
    book,
    place: "object",
    end: () => started,
  });
  started = ObjectEnd.start({
    place: "object",
    storage: await copyStorage,
    book,
    clock: { now: () => Date.now(), setTimer: (ms, fire) => clearTimeout.bind(null, setTimeout(fire, ms)) },
    apply: (batch) => copied.copy.follow(batch),
    open: (storage: Storage, lease) => Harness.open(storage, { registry: registry(), lease }, ctx),
  });
  const end = await started;
  const sockets: Array<{ close(): void }> = [];
  const follow = followObject({ url: "ws://object/follow", connect: () => socketTo(end, sockets) });
  const tab = createHost({
    database: "tab",
    openStorage: () => openSqliteStorage({ vfs: "memory" }),
    harness: { registry: registry(), models: models.api, resume: true, lease: follow.lease, serverCalls: follow.serverCalls },
    onReady: (harness) => follow.attach(harness),
    pageCallsElsewhere: () => follow.pageCalls,
    now: () => performance.now(),
  });
  await tab.ready;
  expect(tab.service.status()).toMatchObject({ kind: "ready", runs: "here" });
  const root = await tab.service.rootConversation({ model: "faux/faux-1" });
  const submission = await tab.service.submit(root, { type: "input", content: "ask me", requestId: "q" });
  const device = pageOf(copied.copy.service, "device-page");
  await sees(copied.copy.service);
  return { models, tab, follow, root, submission, device, copy: copied.copy, sockets };
}

describe("a device's page answers the tab's page call at the object's copy (issue 27 item 5, decision 0044)", () => {
  it("§4c S8: the device claims and answers through the copy; the tab commits the one result, the model reads it", async () => {
    const world = await tabRuns("unsafe");
    const runs: string[] = [];
    const errors: unknown[] = [];
    await world.device.providePageTools(
      world.root,
      {
        ask_person: ({ question }) => {
          runs.push(String(question));
          return "green from the device";
        },
      },
      { onError: (error) => errors.push(error) },
    );
    expect(await world.tab.service.waitForSubmission(world.submission)).toMatchObject({ status: "done" });
    expect(runs).toEqual(["Which colour?"]);
    expect(errors).toEqual([]);
    const results = await resultsAt(world.tab.service, world.root);
    expect(results).toHaveLength(1);
    expect(texts(results[0]!.message)).toEqual(["green from the device"]);
    expect(JSON.stringify(world.models.requests[1])).toContain("green from the device");
    // The copy the device reads has the same one result.
    await expect.poll(async () => (await resultsAt(world.copy.service, world.root)).length).toBe(1);
    await world.tab.service.close();
    world.follow.close();
  });

  it("§4c S8: the device's page goes while it runs an unsafe call: its release reaches the tab, the model gets the interrupted result, the late answer commits nothing", async () => {
    const world = await tabRuns("unsafe");
    let finish: ((result: string) => void) | undefined;
    await world.device.providePageTools(world.root, { ask_person: () => new Promise<string>((resolve) => (finish = resolve)) });
    await expect
      .poll(async () => (await world.tab.service.inspect()).pageCalls.map((call) => call.status), { timeout: 5_000 })
      .toEqual(["claimed"]);
    await expect.poll(() => finish !== undefined).toBe(true);
    world.device.disconnect(); // its socket closed: the copy's watch ends, the release is forwarded
    expect(await world.tab.service.waitForSubmission(world.submission)).toMatchObject({ status: "done" });
    const results = await resultsAt(world.tab.service, world.root);
    expect(results.map((result) => result.code)).toEqual(["interrupted"]);
    finish!("too late");
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await resultsAt(world.tab.service, world.root)).toHaveLength(1);
    await world.tab.service.close();
    world.follow.close();
  });
});
