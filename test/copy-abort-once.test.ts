import { describe, expect, it } from "vitest";
import type { Json } from "../src/base/json.ts";
import { SerialQueue } from "../src/base/serial.ts";
import { type LeaseBook, memoryArbiter } from "../src/follow/arbiter.ts";
import { type CopyService, createCopyService } from "../src/follow/copy-service.ts";
import { copyWrites } from "../src/follow/copy-writes.ts";
import { answerForwarded, type ForwardAnswer, type ForwardedWrite, type HolderPort } from "../src/follow/forwarding.ts";
import { applyPushed, type LoggedBatch } from "../src/follow/handover.ts";
import { FollowLink } from "../src/follow/link-client.ts";
import { answerHelloCall, errorShape, switchRefusal } from "../src/follow/object-door.ts";
import { encodeFollowMessage, parseFollowMessage } from "../src/follow/wire.ts";
import { hostEndpoint, remoteHost } from "../src/host/endpoint.ts";
import { deserializeError, serializeError } from "../src/host/error-wire.ts";
import { createHost } from "../src/host/host.ts";
import type { RemoteHost } from "../src/host/protocol.ts";
import {
  type AnyTool,
  ConnectionLost,
  createRegistry,
  defineExtension,
  Harness,
  HarnessClosed,
  type HarnessOptions,
  memoryEnvs,
  NotReady,
  type Storage,
} from "../src/index.ts";
import { createManualClock, type ManualClock } from "../src/testing/clock.ts";
import { ScriptedModels, type Step } from "./agent-support.ts";
import { ctx, flush, memoryBackend, runUntil, wire } from "./support.ts";

/**
 * A holder ("tab") and the copy service another device reaches ("object"): the copy's read-only harness runs in
 * the object's host, follows every transaction the tab stores, and forwards writes to the tab through `port`.
 */
interface CopyWorld {
  tab: Harness;
  tabStorage: Storage;
  copyStorage: Storage;
  copy: CopyService;
  /** The device: the protocol's typed client over the copy service's endpoint (arguments checked as at any host). */
  device: RemoteHost;
  port: TestPort;
  clock: ManualClock;
  arbiter: LeaseBook;
  caughtUp(): Promise<void>;
  /** Stops pushing (the link is down) or starts again (`true`: catches up at once). */
  link(up: boolean): Promise<void>;
  options: Omit<HarnessOptions, "lease" | "clock" | "readOnly">;
}

/** What the link does with one forward: deliver it, lose it, lose its answer, or deliver it twice. */
type ForwardAction = "deliver" | "drop" | "lose-answer" | "duplicate";

/** The follow link's forwarding half as a lossy test link: each forward crosses as JSON, errors as the wire sends them. */
class TestPort implements HolderPort {
  /** Actions for the next forwards, in order (then "deliver"). */
  plan: ForwardAction[] = [];
  /** False: every forward is lost (the holder is unreachable). */
  up = true;
  /** Forwards sent, and forwards that reached the holder. */
  sent = 0;
  delivered = 0;
  constructor(private readonly holder: () => Harness) {}

  async forward(write: ForwardedWrite): Promise<ForwardAnswer> {
    this.sent++;
    const action = this.plan.shift() ?? "deliver";
    if (!this.up || action === "drop") throw new ConnectionLost();
    const deliver = async () => {
      this.delivered++;
      try {
        return JSON.parse(JSON.stringify(await answerForwarded(this.holder(), JSON.parse(JSON.stringify(write)), ctx))) as ForwardAnswer;
      } catch (error) {
        throw deserializeError(serializeError(error));
      }
    };
    if (action === "duplicate") void deliver().catch(() => {});
    const answer = await deliver();
    if (action === "lose-answer") throw new ConnectionLost();
    return answer;
  }
}

async function openCopyWorld(
  stores: { tab: Storage; copy: Storage },
  options: Omit<HarnessOptions, "lease" | "clock" | "readOnly">,
  clock: ManualClock = createManualClock(1_000),
): Promise<CopyWorld> {
  const arbiter = memoryArbiter({ clock });
  const tab = await Harness.open(stores.tab, { ...options, clock, lease: { place: "tab", arbiter } }, ctx);
  const host = createHost({
    database: "object copy",
    openStorage: async () => stores.copy,
    harness: { ...options, clock, readOnly: true },
    now: clock.now,
  });
  const port = new TestPort(() => tab);
  const copy = createCopyService({ copy: host, holder: port, clock, where: () => `the tab (lease epoch ${arbiter.record.epoch})` });
  await host.ready;
  const line = new SerialQueue();
  let head = 0;
  let up = true;
  const push = () =>
    line.run(async () => {
      if (!up || copy.holding) return;
      const batches = (await stores.tab.readLog!(head, 64)) as LoggedBatch[];
      head = await applyPushed(stores.copy, head, batches, (batch) => copy.follow(batch));
    });
  tab.onLog(() => void push());
  await push();
  const caughtUp = async () => {
    while (up && !copy.holding && head < (tab.lease?.position ?? 0)) await push();
  };
  return {
    tab,
    tabStorage: stores.tab,
    copyStorage: stores.copy,
    copy,
    device: remoteHost(hostEndpoint(copy.service)),
    port,
    clock,
    arbiter,
    caughtUp,
    async link(next) {
      up = next;
      if (next) await caughtUp();
    },
    options,
  };
}

function agentOptions(models: ScriptedModels, tools: AnyTool[] = []) {
  return {
    registry: createRegistry().install(defineExtension({ name: "test", tools })),
    models: models.api,
    env: memoryEnvs(),
    settings: { progress: { persistWithinMs: 0 } },
  };
}

async function world(storage: () => Promise<Storage>, steps: Step[], tools: AnyTool[] = []) {
  const models = new ScriptedModels(steps);
  const opened = await openCopyWorld({ tab: await storage(), copy: await storage() }, agentOptions(models, tools));
  const root = await opened.tab.root(ctx, { agent: { model: "faux/faux-1" } });
  await opened.caughtUp();
  return { ...opened, models, root };
}

describe("one press of stop through the object ends the runs going when it lands, never a later one (review of 0135, H1)", () => {
  it("S8/S12: an abort the handed-back instance answers NotReady is not sent again under a new id: a run started since is not stopped", async () => {
    const opened = await world(memoryBackend.create, [{ hang: "thinking" }, { hang: "thinking" }]);
    const { root, clock } = opened;
    const carried = wire(clock);
    const calls: Array<{ id: string; method: string; args: Json[] }> = [];
    const link: FollowLink = new FollowLink({
      clock,
      send: (frame) =>
        carried(() => {
          const parsed = parseFollowMessage(frame, "tab");
          if (!("message" in parsed) || parsed.message.type !== "call") return;
          const { id, topic, method, args } = parsed.message;
          if (topic === "wire") return carried(() => link.receive(encodeFollowMessage(answerHelloCall(id, args))));
          calls.push({ id, method, args });
        }),
    });
    link.connected();
    const answer = (id: string, result: { value: Json } | { error: unknown }) =>
      carried(() =>
        link.receive(
          encodeFollowMessage(
            "value" in result ? { type: "answer", id, value: result.value } : { type: "answer", id, error: errorShape(result.error) },
          ),
        ),
      );
    const nextInstance = copyWrites(() => opened.copy.service); // the object's next instance: the real copy handler
    const one = await root.submit({ type: "input", content: "one", requestId: "one" }, ctx);
    await runUntil(clock, () => opened.models.hanging === 1);
    await opened.caughtUp();
    // The device's page presses stop once.
    const outcome: { error?: unknown; value?: Json; settled: number } = { settled: 0 };
    link.call("copy", "abortConversation", [root.id]).then(
      (value) => Object.assign(outcome, { value, settled: outcome.settled + 1 }),
      (error: unknown) => Object.assign(outcome, { error, settled: outcome.settled + 1 }),
    );
    await runUntil(clock, () => calls.length >= 1);
    const x = calls[0]!;
    // The handed-back instance answers X NotReady (switchRefusal of its closed host's HarnessClosed) ...
    answer(x.id, { error: switchRefusal(new HarnessClosed(), true, "call again, same key") });
    // ... while X's same-id resend (sent before NotReady arrived) reached the next instance, which makes it.
    let xDone = false;
    void nextInstance("abortConversation", x.args, "device").then((value) => {
      xDone = true;
      answer(x.id, { value });
    });
    await runUntil(clock, () => xDone && outcome.settled > 0);
    expect(await one.wait(ctx)).toMatchObject({ status: "unanswered", reason: "aborted" });
    // The page is told NotReady (retryable: pressing stop again is the page's choice), once.
    expect(outcome.error).toBeInstanceOf(NotReady);
    // A new run starts at the holder (its own page, or another device) after the device's stop.
    const two = await root.submit({ type: "input", content: "two", requestId: "two" }, ctx);
    let twoEnded = false;
    two.wait(ctx).then(
      () => (twoEnded = true),
      () => (twoEnded = true),
    );
    await runUntil(clock, () => opened.models.hanging === 1);
    await opened.caughtUp();
    // Before: at the link's next resend the abort went again under a new id, and the object stopped run two.
    for (let pass = 0; pass < 20; pass++) {
      clock.advance(2_000);
      await flush(2);
    }
    expect(calls.map((call) => call.id)).toEqual([x.id]);
    expect(link.stats.notReadyRetries).toBe(0);
    expect(outcome.settled).toBe(1);
    expect(opened.models.hanging).toBe(1);
    expect(twoEnded).toBe(false); // run two goes on: only the user's own press stops it
    link.close();
    await opened.tab.close(ctx);
  });
});
