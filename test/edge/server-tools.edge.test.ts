import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { systemClock } from "../../src/base/clock.ts";
import { FollowLink } from "../../src/follow/link-client.ts";
import { Mirror, remoteArbiter } from "../../src/follow/mirror.ts";
import { linkServerCalls } from "../../src/follow/server-call-client.ts";
import { encodeFollowMessage } from "../../src/follow/wire.ts";
import {
  createRegistry,
  BACKGROUND_CONTEXT as ctx,
  defineExtension,
  defineTool,
  Harness,
  type ServerCallRequest,
  type ToolResultEntryPayload,
} from "../../src/index.ts";
import { openSqliteStorage } from "../../src/storage/sqlite/open-storage.ts";
import { answer, callTool, ScriptedModels, texts } from "../agent-support.ts";
import { intentTask } from "../server-call-copy-support.ts";
import { followSocket, until } from "./follow-support.ts";
import { type Edge, pause, startEdge } from "./support.ts";

// Issue 27 item 5 (decision 0036) in workerd: the object in follow mode serves the tab's server tool calls on the
// follow link (topic server-tools), epoch-checked against its lease book, stored in its own SQLite under the call
// id: asked again — after an abort of the object too — the call gets the stored answer and the tool never runs twice.

/** A follow link to object `name` as `caller` on a follow socket (reconnecting after a close until `stop()`). */
function followLink(edge: Edge, name: string, caller: string) {
  const link: FollowLink = new FollowLink({
    clock: systemClock,
    send: (frame) => socket.open && socket.send(frame), // dropped while the socket is down, as before
    resendMs: 300,
  });
  const socket = followSocket(edge, name, caller, link);
  return {
    link,
    get open() {
      return socket.open;
    },
    stop: () => socket.stop(),
  };
}

const request = (epoch: number): ServerCallRequest => ({
  place: "tab",
  epoch,
  conversationId: 1,
  taskId: 7,
  callId: "call_1",
  tool: "charge",
  arguments: { amount: 5 },
  replay: "unsafe",
});

/**
 * The tab pushes the intent of `request`'s call to the object's copy (its first transaction, under `epoch`): the
 * object runs only a call of its copy (decision 0051). Resolves once the object acknowledged it.
 */
async function pushIntent(link: FollowLink, epoch: number): Promise<void> {
  const { place: _place, epoch: _epoch, ...call } = request(epoch);
  let acked = false;
  const stop = link.onReply((reply) => {
    if (reply.type === "ack" && reply.head >= 1) acked = true;
  });
  const task = intentTask(call);
  const batch = { fence: { epoch, position: 1 }, tasks: [task], conversations: [], entries: [], submissions: [], documents: [] };
  const message = JSON.parse(encodeFollowMessage({ type: "push", from: "tab", epoch, batches: [batch as never], parts: [] }));
  for (let i = 0; i < 40 && !acked; i++) {
    link.send(message);
    await pause(50);
  }
  stop();
  expect(acked).toBe(true);
}

describe("server tools on the object in follow mode (decision 0036)", () => {
  let edge: Edge;
  beforeAll(async () => {
    edge = await startEdge();
  }, 120_000);
  afterAll(async () => {
    await edge?.dispose();
  });

  it("S8 one run per call id: asked twice, and again after ctx.abort(), the answer is the stored one; a superseded epoch is refused", async () => {
    const name = "server-tools";
    const tab = followLink(edge, name, "alice");
    await until("the follow socket opens", () => tab.open);
    const arbiter = remoteArbiter(tab.link);
    const { epoch } = await arbiter.acquire("tab", 0);
    // Decision 0051: before the copy holds the call's intent, the holder's ask runs nothing (the run below is run 1).
    await expect(tab.link.call("server-tools", "call", [request(epoch) as never])).rejects.toMatchObject({ name: "ServerCallNotInCopy" });
    await expect(
      tab.link.call("server-tools", "call", [{ ...request(epoch), arguments: { amount: 5_000 } } as never]),
    ).rejects.toMatchObject({ name: "ServerCallNotInCopy" });
    await pushIntent(tab.link, epoch);
    await expect(
      tab.link.call("server-tools", "call", [{ ...request(epoch), arguments: { amount: 5_000 } } as never]),
    ).rejects.toMatchObject({ name: "ServerCallNotInCopy" });
    const first = (await tab.link.call("server-tools", "call", [request(epoch) as never])) as { result: { content: unknown } };
    expect(first.result.content).toEqual([{ type: "text", text: "charged 5 (run 1)" }]);
    expect(await tab.link.call("server-tools", "call", [request(epoch) as never])).toEqual(first);
    await edge.call("follow", name, "/abort").catch(() => {});
    await pause(200);
    expect(await tab.link.call("server-tools", "call", [request(epoch) as never])).toEqual(first);
    // A restarted tab takes epoch + 1: an ask under the old epoch is refused, the new one gets the stored answer.
    const next = await arbiter.acquire("tab", 1);
    await expect(tab.link.call("server-tools", "call", [request(epoch) as never])).rejects.toMatchObject({ name: "StaleEpoch" });
    expect(await tab.link.call("server-tools", "call", [request(next.epoch) as never])).toEqual(first);
    tab.stop();
  }, 60_000);

  it("a caller the object's authorize does not let call server tools is refused", async () => {
    const name = "server-tools-mallory";
    const tab = followLink(edge, name, "mallory");
    await until("the follow socket opens", () => tab.open);
    const { epoch } = await remoteArbiter(tab.link).acquire("tab", 0);
    await expect(tab.link.call("server-tools", "call", [request(epoch) as never])).rejects.toMatchObject({ name: "NotAuthorized" });
    tab.stop();
  }, 60_000);

  it("S8 a tab's agent under the object's lease calls the server tool: the object runs it, the tab commits its answer", async () => {
    const name = "server-tools-tab";
    const tab = followLink(edge, name, "alice");
    await until("the follow socket opens", () => tab.open);
    const tabTool = defineTool<{ amount: number }>({
      name: "charge",
      description: "Charge the card on file",
      parameters: { type: "object", properties: { amount: { type: "number" } }, required: ["amount"] },
      runsOn: "server",
      execute: () => {
        throw new Error("the tab has no payment key");
      },
    });
    const models = new ScriptedModels([callTool("charge", { amount: 5 }, "call_tab"), answer("paid")]);
    let mirror!: Mirror;
    const harness = await Harness.open(
      await openSqliteStorage({ vfs: "memory" }),
      {
        registry: createRegistry().install(defineExtension({ name: "shop", tools: [tabTool] })),
        models: models.api,
        // Effects wait for the object's acknowledgement (decision 0032), as the worker's follow link wires it.
        lease: {
          place: "tab",
          arbiter: remoteArbiter(tab.link),
          confirm: (position, context) => mirror.whenAcknowledged(position, context),
        },
        serverCalls: linkServerCalls(tab.link, systemClock),
      },
      ctx,
    );
    // The tab's commits reach the object's copy: the object runs only a call its copy holds (decision 0051).
    mirror = new Mirror({ harness, link: tab.link, clock: systemClock, resendMs: 300 });
    expect(harness.lease?.place).toBe("tab");
    const root = await harness.root(ctx, { agent: { model: "faux/faux-1" } });
    const submission = await root.submit({ type: "input", content: "pay", requestId: "pay" }, ctx);
    expect((await submission.wait(ctx)).status).toBe("done");
    const results = (await root.entries(ctx)).filter((entry) => entry.kind === "pi.tool-result");
    expect(results.map((entry) => texts((entry.payload as unknown as ToolResultEntryPayload).message))).toEqual([["charged 5 (run 1)"]]);
    mirror.stop();
    await harness.close(ctx);
    tab.stop();
  }, 60_000);
});
