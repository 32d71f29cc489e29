/**
 * The copy-service world shared by the copy tests: a holder tab, the object's read-only copy in its own host, the
 * copy service over it, and a lossy forwarding port between them.
 */
import { SerialQueue } from "../src/base/serial.ts";
import { type LeaseBook, memoryArbiter } from "../src/follow/arbiter.ts";
import { type CopyService, createCopyService } from "../src/follow/copy-service.ts";
import { answerForwarded, type ForwardAnswer, type ForwardedWrite, type HolderPort } from "../src/follow/forwarding.ts";
import { applyPushed, type LoggedBatch } from "../src/follow/handover.ts";
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
  type HarnessOptions,
  memoryEnvs,
  type Storage,
} from "../src/index.ts";
import { createManualClock, type ManualClock } from "../src/testing/clock.ts";
import type { ScriptedModels } from "./agent-support.ts";
import { ctx } from "./support.ts";

/**
 * A holder ("tab") and the copy service another device reaches ("object"): the copy's read-only harness runs in
 * the object's host, follows every transaction the tab stores, and forwards writes to the tab through `port`.
 */
export interface CopyWorld {
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
export type ForwardAction = "deliver" | "drop" | "lose-answer" | "duplicate";

/** The follow link's forwarding half as a lossy test link: each forward crosses as JSON, errors as the wire sends them. */
export class TestPort implements HolderPort {
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

export async function openCopyWorld(
  stores: { tab: Storage; copy: Storage },
  options: Omit<HarnessOptions, "lease" | "clock" | "readOnly">,
  clock: ManualClock = createManualClock(1_000),
  /** Called with the copy's harness before the copy service listens to it (a listener of its own first). */
  first?: (copy: Harness) => void,
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
  if (first) void host.ready.then(first);
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

export function agentOptions(models: ScriptedModels, tools: AnyTool[] = []) {
  return {
    registry: createRegistry().install(defineExtension({ name: "test", tools })),
    models: models.api,
    env: memoryEnvs(),
    settings: { progress: { persistWithinMs: 0 } },
  };
}
