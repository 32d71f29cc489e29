import { describe, expect, it } from "vitest";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { FollowLink } from "../src/follow/link-client.ts";
import { Mirror, remoteArbiter } from "../src/follow/mirror.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { createRegistry, Harness, type Storage } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { answer, createWorld, openAgent, ScriptedModels } from "./agent-support.ts";
import { ctx, runUntil } from "./support.ts";

// Issue 27 item 3, decisions 0031 and 0032 together: the tab's lease asked of the object over the follow link, its
// mirror pushing live, and `LeaseOptions.confirm` bound to the mirror's acknowledgements: the model request goes out
// only once the object's copy holds the commit that recorded it.

async function mirroredTab() {
  const clock = createManualClock(1_000);
  let record: LeaseRecord = { epoch: 0 };
  const book = new LeaseBook({ clock, ttlMs: 5_000, load: () => record, save: (next) => void (record = next) });
  const copy = await openSqliteStorage({ vfs: "memory" });
  const end = await ObjectEnd.start({
    place: "object",
    storage: copy,
    book,
    clock,
    open: (storage: Storage, lease) => Harness.open(storage, { registry: createRegistry(), clock, lease, resume: true }, ctx),
  });
  let up = true;
  const toTab = (reply: string) => {
    if (up) setTimeout(() => up && link.receive(reply), 0);
  };
  const link = new FollowLink({
    clock,
    send: (frame) => {
      if (!up) throw new Error("the socket is closed");
      setTimeout(() => up && void end.receive(frame, toTab, () => true), 0);
    },
  });
  link.connected();
  const models = new ScriptedModels([answer("hello")]);
  const seen: Array<{ acknowledged: number; head: number }> = [];
  let mirror: Mirror | undefined;
  const api = models.api;
  const watched = new Proxy(api, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver);
      if (key !== "streamSimple" || typeof value !== "function") return value;
      return (...args: unknown[]) => {
        seen.push({ acknowledged: mirror!.acknowledged, head: opened.harness.lease!.position });
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  const opened = await openAgent(await openSqliteStorage({ vfs: "memory" }), {
    models: { api: watched } as unknown as ScriptedModels, // openAgent reads only its api
    world: createWorld(),
    clock,
    lease: { place: "tab", arbiter: remoteArbiter(link), confirm: (position, context) => mirror!.whenAcknowledged(position, context) },
  });
  mirror = new Mirror({ harness: opened.harness, link, clock });
  return {
    ...opened,
    mirror,
    models,
    seen,
    setUp(next: boolean) {
      up = next;
      if (next) link.connected();
      else link.disconnected();
    },
  };
}

describe("acknowledgement before effects over the follow link (decision 0032 with 0031's Mirror)", () => {
  it("S9: the model request goes out once the object acknowledged its commit; the answer follows", async () => {
    const tab = await mirroredTab();
    const submission = await tab.root.submit({ type: "input", content: "hi", requestId: "q1" }, ctx);
    await runUntil(tab.clock, () => tab.seen.length === 1);
    expect(tab.seen[0]!.acknowledged).toBeGreaterThanOrEqual(tab.seen[0]!.head);
    await runUntil(tab.clock, async () => (await submission.record(ctx)).status === "done");
    await tab.harness.close(ctx);
  });

  it("with the socket down the request waits (effect-free steps are stored), and goes out once the link is back before the expiry", async () => {
    const tab = await mirroredTab();
    tab.setUp(false);
    await tab.root.submit({ type: "input", content: "hi", requestId: "q1" }, ctx);
    for (let i = 0; i < 10; i++) {
      tab.clock.advance(100);
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    expect(tab.seen).toHaveLength(0);
    expect(tab.harness.lease!.position).toBeGreaterThan(tab.mirror.acknowledged);
    tab.setUp(true);
    await runUntil(tab.clock, () => tab.seen.length === 1);
    expect(tab.seen[0]!.acknowledged).toBeGreaterThanOrEqual(tab.seen[0]!.head);
    await tab.harness.close(ctx);
  });
});
