import { describe, expect, it } from "vitest";
import { ConversationViewStore } from "../src/agent/view/view-store.ts";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { createCopyService } from "../src/follow/copy-service.ts";
import { answerForwarded, type HolderPort, linkHolder } from "../src/follow/forwarding.ts";
import { FollowLink } from "../src/follow/link-client.ts";
import { Mirror, remoteArbiter } from "../src/follow/mirror.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { hostEndpoint, remoteHost } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, Harness, memoryEnvs, type Storage } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { answer, ScriptedModels } from "./agent-support.ts";
import { ctx, runUntil } from "./support.ts";

/**
 * The copy service on the object's end of a real follow link (decisions 0031 and 0034), in one process: the tab's
 * harness under `remoteArbiter(link)` with its `Mirror`; the object's `ObjectEnd` applying every push through the
 * copy service's follower; a device reaching the copy service through the protocol's endpoint. The object calls
 * the tab's topic `forward` over the same link (`ObjectEnd.call`, decision 0037).
 */
async function objectWorld() {
  const clock = createManualClock(1_000);
  let record: LeaseRecord = { epoch: 0 };
  const book = new LeaseBook({ clock, ttlMs: 5_000, load: () => record, save: (next) => void (record = next) });
  const models = new ScriptedModels([answer("from the tab")]);
  const options = { registry: createRegistry(), models: models.api, env: memoryEnvs(), settings: { progress: { persistWithinMs: 0 } } };
  const copyStorage = await openSqliteStorage({ vfs: "memory" });
  const follower = createHost({
    database: "copy",
    openStorage: async () => copyStorage,
    harness: { ...options, clock, readOnly: true },
    now: clock.now,
  });
  // Object → tab calls of topic `forward` on the tab's connection (ObjectEnd.call), answers checked (linkHolder).
  const holder: HolderPort = linkHolder((topic, method, args) => end.call(topic, method, args));
  const copy = createCopyService({ copy: follower, holder, clock, where: () => `${record.holder} (lease epoch ${record.epoch})` });
  await follower.ready;
  const end = await ObjectEnd.start({
    place: "object",
    storage: copyStorage,
    book,
    clock,
    apply: (batch) => copy.follow(batch),
    open: async (storage: Storage, lease) => {
      const host = createHost({
        database: "object",
        openStorage: async () => storage,
        harness: { ...options, clock, lease, resume: true },
        now: clock.now,
      });
      await copy.hold(host);
      return host.ready;
    },
  });
  const toTab = (frame: string) => setTimeout(() => link.receive(frame), 0);
  const link = new FollowLink({ clock, send: (frame) => setTimeout(() => void end.receive(frame, toTab, () => true), 0) });
  link.connected();
  const tab = await Harness.open(
    await openSqliteStorage({ vfs: "memory" }),
    { ...options, clock, lease: { place: "tab", arbiter: remoteArbiter(link) } },
    ctx,
  );
  link.serve("forward", (method, args) => answerForwarded(tab, { method, args }, ctx) as Promise<never>);
  const mirror = new Mirror({ harness: tab, link, clock });
  return { clock, link, tab, mirror, end, copy, device: remoteHost(hostEndpoint(copy.service)), models, record: () => record };
}

describe("the copy service on the object's end of a follow link (decisions 0031, 0034)", () => {
  it("0034: a device watches the object's copy live as the tab's mirror pushes, and its submission crosses the link to the tab once", async () => {
    const { clock, tab, mirror, device } = await objectWorld();
    const root = await tab.root(ctx, { agent: { model: "faux/faux-1" } });
    await runUntil(clock, () => mirror.acknowledged >= (tab.lease?.position ?? 0));
    const store = new ConversationViewStore();
    await device.watchConversation(root.id, (update) => store.apply(update));
    let id: number | undefined;
    void device.submit(root.id, { type: "input", content: "hi", requestId: "r1" }).then((submitted) => (id = submitted));
    await runUntil(clock, () => id !== undefined);
    const outcome = await device.waitForSubmission(id!);
    expect(outcome).toMatchObject({ status: "done", answer: { text: "from the tab" } });
    await runUntil(clock, async () => store.state?.entries.length === (await root.entries(ctx)).length);
    expect(store.state?.entries).toEqual((await root.view(ctx)).entries);
    expect((await tab.submission(id!, ctx)).id).toBe(id);
    await expect(device.configure(root.id, { instructions: "x" })).rejects.toMatchObject({
      name: "RunsElsewhere",
      place: "tab (lease epoch 1)",
    });
    mirror.stop();
  });

  it("S12 (review of 0130, M1): the object's copy closed for good while the tab holds the lease: the wait for its acknowledgement ends with HarnessClosed within one lease's time", async () => {
    const { clock, link, tab, mirror, copy } = await objectWorld();
    await runUntil(clock, () => mirror.acknowledged >= (tab.lease?.position ?? 0));
    const heard: string[] = [];
    let firstHeard: number | undefined;
    link.onReply((reply) => {
      if (reply.type !== "refused") return;
      heard.push(String(reply.error.name));
      firstHeard ??= clock.now();
    });
    await copy.close(); // the app closes the object's service in follow mode
    await tab.root(ctx, { agent: { model: "faux/faux-1" } });
    let settled: Error | "pending" | "resolved" = "pending";
    let settledAt: number | undefined;
    mirror.whenAcknowledged(tab.lease!.position, ctx).then(
      () => (settled = "resolved"),
      (error: Error) => {
        settled = error;
        settledAt = clock.now();
      },
    );
    await runUntil(clock, () => settled !== "pending" || clock.now() > 121_000);
    // Before: the copy's HarnessClosed was answered NotReady and passed for good (62 rounds in 120 s, the wait pending).
    expect(settled).toMatchObject({ name: "HarnessClosed" });
    expect(mirror.refused).toMatchObject({ name: "HarnessClosed" });
    // Not the object's switch (it never handed back): its refusal keeps its name, and the tab took it as final within
    // one lease's time (the mirror's default, 30 s) and a resend.
    expect(heard.length > 0 && heard.every((name) => name === "HarnessClosed")).toBe(true);
    expect(settledAt! - firstHeard!).toBeLessThanOrEqual(30_000 + 2_000);
    tab.close(ctx).catch(() => {});
  });
});
