/**
 * The world of a following tab's writes (decisions 0096, 0097), in memory: the tab holds the lease and mirrors to the
 * object's `ObjectEnd`, whose copy service forwards to the tab; devices ("phones") reach the object on links of their
 * own, each with its own connection and door.
 */
import type { Json } from "../src/base/json.ts";
import type { TabCopies } from "../src/browser/follow-writes.ts";
import { ConnectionLost } from "../src/errors.ts";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { createCopyService } from "../src/follow/copy-service.ts";
import { COPY, type CopyWritesOptions, copyWrites } from "../src/follow/copy-writes.ts";
import { answerForwarded, type HolderPort, linkHolder } from "../src/follow/forwarding.ts";
import { FollowLink } from "../src/follow/link-client.ts";
import { Mirror, remoteArbiter } from "../src/follow/mirror.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import type { FollowAction, FollowRequest } from "../src/follow/object-end-options.ts";
import type { FollowTopic } from "../src/follow/wire.ts";
import { createHost } from "../src/host/host.ts";
import { type AnyTool, createRegistry, defineExtension, Harness, memoryEnvs, type Storage } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { answer, ScriptedModels, type Step } from "./agent-support.ts";
import { ctx, runUntil } from "./support.ts";

export type Door = (action: FollowAction, place?: string, request?: FollowRequest) => boolean;

export interface CopyWorldOptions {
  steps?: Step[];
  tools?: AnyTool[];
  /** The link's topics at the object (an older object's, say). */
  topics?: Readonly<Record<string, FollowTopic>>;
  copyWrites?: CopyWritesOptions;
  /** What the tab's frames become on their way to the object (a hostile holder's rewrite, say); default as sent. */
  tabFrames?: (frame: string) => string;
}

/** The tab holds the lease and mirrors; the object's copy service forwards to it; a phone reaches the object on a link of its own. */
export async function copyWorld(authorize: Door, options: CopyWorldOptions = {}) {
  const clock = createManualClock(1_000);
  let record: LeaseRecord = { epoch: 0 };
  const book = new LeaseBook({ clock, ttlMs: 5_000, load: () => record, save: (next) => void (record = next) });
  const models = new ScriptedModels(options.steps ?? [answer("from the tab"), answer("again")]);
  const harnessOptions = {
    registry: createRegistry().install(defineExtension({ name: "test", tools: options.tools ?? [] })),
    models: models.api,
    env: memoryEnvs(),
    settings: { progress: { persistWithinMs: 0 } },
  };
  const copyStorage = await openSqliteStorage({ vfs: "memory" });
  const follower = createHost({
    database: "copy",
    openStorage: async () => copyStorage,
    harness: { ...harnessOptions, clock, readOnly: true },
    now: clock.now,
  });
  const holder: HolderPort = linkHolder((topic, method, args) => end.call(topic, method, args));
  const copy = createCopyService({ copy: follower, holder, clock });
  await follower.ready;
  const end = await ObjectEnd.start({
    place: "object",
    storage: copyStorage,
    book,
    clock,
    apply: (batch) => copy.follow(batch),
    ...(options.topics ? { topics: options.topics } : {}),
    open: async (storage: Storage, lease) => {
      const host = createHost({
        database: "object",
        openStorage: async () => storage,
        harness: { ...harnessOptions, clock, lease, resume: true },
        now: clock.now,
      });
      await copy.hold(host);
      return host.ready;
    },
  });
  end.serve(
    COPY,
    copyWrites(() => copy.service, options.copyWrites),
  );
  const toTab = (frame: string) => setTimeout(() => link.receive(frame), 0);
  const link = new FollowLink({
    clock,
    send: (frame) => setTimeout(() => void end.receive(options.tabFrames?.(frame) ?? frame, toTab, () => true), 0),
  });
  link.connected();
  const tab = await Harness.open(
    await openSqliteStorage({ vfs: "memory" }),
    { ...harnessOptions, clock, lease: { place: "tab", arbiter: remoteArbiter(link) } },
    ctx,
  );
  /** The forwards the tab was sent (method and arguments), answered or not. */
  const forwards: string[] = [];
  const sent: Array<{ method: string; args: Json[] }> = [];
  /** While true the tab answers every forward `ConnectionLost` (the holder unreachable): the copy sends them again. */
  const holderAway = { value: false };
  link.serve("forward", (method, args) => {
    sent.push({ method, args });
    if (holderAway.value) return Promise.reject(new ConnectionLost());
    forwards.push(method);
    return answerForwarded(tab, { method, args }, ctx) as Promise<never>;
  });
  const mirror = new Mirror({ harness: tab, link, clock });
  /** A device's link to the object: its own connection, door and authenticated caller (none: its connection counts). `send` sends a raw frame as a hostile caller would. */
  const device = (door: Door = authorize, caller?: string) => {
    const connection = {};
    const heard: string[] = [];
    const toPhone = (frame: string) => {
      heard.push(frame);
      setTimeout(() => phone.receive(frame), 0);
    };
    const send = (frame: string) => setTimeout(() => void end.receive(frame, toPhone, door, connection, undefined, caller), 0);
    const phone = new FollowLink({ clock, send });
    phone.connected();
    const call = (topic: string, method: string, args: Json[]) => phone.call(topic, method, args);
    return { link: phone, call, send, heard };
  };
  const first = device();
  const root = await tab.root(ctx, { agent: { model: "faux/faux-1" } });
  await runUntil(clock, () => mirror.acknowledged >= (tab.lease?.position ?? 0));
  const submissions = async (requestId: string) =>
    tab.storage.query("SELECT id FROM submissions WHERE request_id = ?", requestId) as Promise<Array<{ id: number }>>;
  return {
    clock,
    tab,
    mirror,
    models,
    root,
    phone: first.link,
    phoneSend: first.send,
    heard: first.heard,
    device,
    forwards,
    sent,
    holderAway,
    submissions,
    copyStorage,
    copy,
  };
}

/** Settles `promise` into `outcomes` as `{ value }` or `{ name, message }` (what a page sees of an error). */
export function settleInto(outcomes: unknown[], promise: Promise<unknown>): void {
  promise.then(
    (value) => outcomes.push({ value }),
    (error: Error) => outcomes.push({ name: error.name, message: error.message }),
  );
}

/** A tab's copies when it keeps one harness (no rebuild): `followingWrites`' second argument. */
export function oneCopy(harness: Harness): TabCopies {
  return { current: () => harness, onAttach: () => () => {} };
}
