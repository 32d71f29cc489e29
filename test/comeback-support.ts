import { counterTask } from "../examples/counter-task.ts";
import type { AnyTool } from "../src/agent/tool.ts";
import type { Clock } from "../src/base/clock.ts";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { type CopyService, createCopyService } from "../src/follow/copy-service.ts";
import { COPY, copyWrites } from "../src/follow/copy-writes.ts";
import { Follower } from "../src/follow/follower.ts";
import type { LogHistory } from "../src/follow/fork.ts";
import { answerForwarded, FORWARD, linkHolder } from "../src/follow/forwarding.ts";
import type { LoggedBatch } from "../src/follow/handover.ts";
import { FollowLink } from "../src/follow/link-client.ts";
import { Mirror, remoteArbiter } from "../src/follow/mirror.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { SERVER_TOOLS_TOPIC } from "../src/follow/server-call-messages.ts";
import { memoryServerCallStore, ServerCalls } from "../src/follow/server-calls.ts";
import type { HandBack } from "../src/follow/wire.ts";
import { createHost } from "../src/host/host.ts";
import {
  type AnyTaskDefinition,
  createRegistry,
  defineExtension,
  Harness,
  type HarnessOptions,
  type Json,
  type Storage,
} from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import type { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { createManualClock, type ManualClock } from "../src/testing/clock.ts";
import { ctx, runUntil, wire } from "./support.ts";

/** What the link does with the `index`-th frame going `way`: deliver it, lose it, or deliver it twice. */
export type Fate = (way: "toObject" | "toTab", index: number) => "deliver" | "drop" | "twice";

/**
 * A tab and its object in one process (decision 0038) over an in-memory link that may lose and duplicate frames
 * (in order otherwise, as a socket is): the object's `ObjectEnd` with its `LeaseBook` and its copy; the tab's
 * harness under `remoteArbiter(link)`, with a `Mirror` while it holds the lease and a `Follower` while it does not.
 */
export async function comebackWorld(
  options: {
    ttlMs?: number;
    to?: number;
    fate?: Fate;
    tasks?: (place: string) => AnyTaskDefinition[];
    /** The agent's tools at each place (a tool that waits for a person: a decision to make). */
    tools?: (place: string) => AnyTool[];
    settings?: HarnessOptions["settings"];
    /** The object's `keepLog` (decision 0047). */
    keepLog?: number;
    /** The object's feed's `roundBytes` (decision 0053: also what it keeps in memory). */
    roundBytes?: number;
    /** How the object stores a pushed transaction in its copy (`ObjectEndOptions.apply`; default the copy's `apply`). */
    objectApply?: (copy: SqliteStorage) => (batch: LoggedBatch) => Promise<void>;
    /** Told when the object handed the lease back (`ObjectEndOptions.onHandedBack`). */
    onHandedBack?: () => void;
    /** The counter's print is a declared effect (it waits for the object's acknowledgement). */
    declared?: boolean;
    /**
     * The object's copy behind the real copy service (`createCopyService`, as on Cloudflare): a follower host on the
     * copy that the object's harness takes over (`hold`), and the world's `nextInstance()` (decision 0130, review L1).
     */
    copyService?: boolean;
    /** The agent's models at the tab and the object (a conversation with an agent can then run a generation). */
    models?: HarnessOptions["models"];
    /** The object's server tools (served on topic `server-tools` by each instance, its store kept across them). */
    serverTools?: () => AnyTool[];
    /** The object's harness clock over the world's (an `ObjectClock` whose timers a test parks: an idle object, 0052). */
    objectClock?: (clock: ManualClock) => Clock;
    /**
     * Whether an instance whose lease another place took lives on (no `onSuperseded`, as before decision 0149) until the
     * test calls `nextInstance()`. Default: it ends when told (its harness closed) and the world starts the next.
     */
    keepSuperseded?: boolean;
    /** How the object's harness opens (around the world's own open: a test that holds the object's takeover). */
    objectOpen?: (open: () => Promise<Harness>) => Promise<Harness>;
  } = {},
) {
  const clock = createManualClock(1_000);
  let record: LeaseRecord = { epoch: 0 };
  const book = new LeaseBook({ clock, ttlMs: options.ttlMs ?? 5_000, load: () => record, save: (next) => void (record = next) });
  const printed: Array<[string, string]> = [];
  const registry = (place: string) =>
    createRegistry().install(
      defineExtension({
        name: "example",
        tasks: [counterTask((line) => void printed.push([place, line])), ...(options.tasks?.(place) ?? [])],
        tools: options.tools?.(place) ?? [],
      }),
    );
  const copy: SqliteStorage = await openSqliteStorage({ vfs: "memory" });
  const tabStorage: SqliteStorage = await openSqliteStorage({ vfs: "memory" });
  const fate = options.fate ?? (() => "deliver");
  const counts = { toObject: 0, toTab: 0 };
  const carried = wire(clock);
  /** The link loses and duplicates only once `lossy` (the world is set up on a reliable one). */
  const link_ = { lossy: false };
  const carry = (way: "toObject" | "toTab", frame: string, deliver: (frame: string) => void) => {
    const what = link_.lossy ? fate(way, counts[way]++) : "deliver";
    if (what === "drop") return;
    carried(() => deliver(frame));
    if (what === "twice") carried(() => deliver(frame));
  };
  /** The current instance's copy service (with `copyService`). */
  let copyService: CopyService | undefined;
  /** The object's server tool calls, kept across instances (as in its SQLite). */
  const serverStore = memoryServerCallStore();
  /** Lease answers by request id, kept across instances (as in its SQLite): a call repeated to the next one is answered the same. */
  const answers = new Map<string, Json>();
  /** An instance of the object: its end on the copy (and the copy service over it, with `copyService`). */
  const startObject = async () => {
    const objectClock = options.objectClock?.(clock) ?? clock;
    const harness = { registry: registry("object"), clock: objectClock, settings: options.settings, models: options.models };
    const follower = options.copyService
      ? createHost({ database: "copy", openStorage: async () => copy, harness: { ...harness, readOnly: true }, now: clock.now })
      : undefined;
    // Writes made at the copy are forwarded to the tab over its link, as the object's own calls (follow-copy.ts).
    const holder = linkHolder((topic, method, args) => (instance ? instance.call(topic, method, args) : Promise.reject(new Error("none"))));
    // As on Cloudflare: in the instance's switch its pages are answered NotReady, not the closed host's HarnessClosed (0139).
    const switching = () => instance?.switching ?? false;
    const service = follower && createCopyService({ copy: follower, holder, clock, switching });
    let instance: ObjectEnd | undefined;
    await follower?.ready;
    copyService = service;
    const started: ObjectEnd = await ObjectEnd.start({
      place: "object",
      storage: copy,
      book,
      clock,
      answers: { get: (id) => answers.get(id), put: (id, answer) => void answers.set(id, answer) },
      ...(options.keepLog === undefined ? {} : { keepLog: options.keepLog }),
      ...(options.roundBytes === undefined ? {} : { roundBytes: options.roundBytes }),
      ...(options.objectApply ? { apply: options.objectApply(copy) } : service ? { apply: (batch) => service.follow(batch) } : {}),
      ...(options.onHandedBack ? { onHandedBack: options.onHandedBack } : {}),
      // As on Cloudflare (following.ts): its pages are told the status again as the switch begins and ends (0145).
      ...(service ? { onSwitch: () => service.switchMoved() } : {}),
      // The host's end of a superseded instance (decision 0149): its harness closed, the next instance on the same copy.
      ...(options.keepSuperseded ? {} : { onSuperseded: () => void endSuperseded(started) }),
      open: async (storage: Storage, lease) => {
        const opening = () => Harness.open(storage, { ...harness, lease, resume: true }, ctx);
        if (!service) return options.objectOpen ? options.objectOpen(opening) : opening();
        const host = createHost({
          database: "object",
          openStorage: async () => storage,
          harness: { ...harness, lease, resume: true },
          now: clock.now,
        });
        await service.hold(host);
        return host.ready;
      },
    });
    instance = started;
    // As on Cloudflare (object.ts): a following tab's writes through the copy service, and the tab's server tools.
    if (service)
      started.serve(
        COPY,
        copyWrites(() => service.service),
      );
    const tools = options.serverTools?.();
    if (tools) {
      const calls = new ServerCalls({ lease: book, store: serverStore, clock, tool: (name) => tools.find((tool) => tool.name === name) });
      started.serve(SERVER_TOOLS_TOPIC, async (_method, args) => (await calls.call(args[0] as never, ctx)) as never);
    }
    return started;
  };
  /** Ends `instance` as a platform would once its lease was taken (decision 0149) and starts the next one. */
  const endSuperseded = async (instance: ObjectEnd) => {
    ended.push(instance);
    await (await instance.harness)?.close(ctx);
    end = await startObject();
  };
  /** The instances ended by `onSuperseded`, in order. */
  const ended: ObjectEnd[] = [];
  let end = await startObject();
  const link: FollowLink = new FollowLink({
    clock,
    send: (frame) => carry("toObject", frame, (f) => void end.receive(f, toTab, () => true, "the tab's socket")),
  });
  const toTab = (frame: string) => carry("toTab", frame, (f) => link.receive(f));
  link.connected();
  const forks: LogHistory[] = [];

  /**
   * Opens the tab's harness on its storage (the clock runs meanwhile: a lost call is sent again). An open that fails
   * (its lease ask unanswered past the call's timeout) fails this at once, rather than the clock running on to its limit.
   */
  const reopenTab = async () => {
    let settled = false;
    const opening = openTab();
    // Both handlers before the clock runs: a failed open is this call's rejection, never an unhandled one (review of 0135, L2).
    opening.then(
      () => (settled = true),
      () => (settled = true),
    );
    await runUntil(clock, () => settled);
    return opening;
  };

  /** Opens the tab's harness on its storage: writable with a mirror when granted, read-only with a follower. */
  const openTab = async () => {
    let mirror: Mirror | undefined;
    const harness = await Harness.open(
      tabStorage,
      {
        registry: registry("tab"),
        clock,
        settings: options.settings,
        models: options.models,
        lease: {
          place: "tab",
          arbiter: remoteArbiter(link),
          confirm: (position, context) => (mirror ? mirror.whenAcknowledged(position, context) : Promise.resolve()),
        },
      },
      ctx,
    );
    if (!harness.readOnly) mirror = new Mirror({ harness, link, clock });
    // The object forwards writes made at its copy to the tab that holds the lease (decision 0034; browser/follow.ts).
    link.serve(FORWARD, (method, args) => answerForwarded(harness, { method, args }, ctx) as Promise<unknown> as Promise<Json>);
    const follower = harness.readOnly
      ? new Follower({ harness, link, place: "tab", onForked: (theirs) => void forks.push(theirs) })
      : undefined;
    return { harness, mirror, follower };
  };

  const tab = await openTab();
  const root = await tab.harness.root(ctx);
  const taskId = await root.commit(
    (tx) =>
      tx.createTask(
        counterTask(() => {}),
        { to: options.to ?? 5, ...(options.declared ? { declared: true } : {}) },
      ),
    ctx,
  );
  return {
    clock,
    registry,
    book,
    record: () => record,
    printed,
    copy,
    tabStorage,
    /** The current instance's copy service (with `copyService`). */
    get copyService() {
      return copyService;
    },
    serverStore,
    /** The instances the world ended because another place took their lease (`onSuperseded`, decision 0149). */
    ended,
    /** The object's end (its current instance). */
    get end() {
      return end;
    },
    link,
    tab,
    taskId,
    openTab,
    reopenTab,
    forks,
    /**
     * The tab hands its lease over, opens again following the object, and has caught up once the object printed
     * `lines` in all: where every take-back test starts.
     */
    async handOverAndFollow(lines: number) {
      let handed = false;
      void tab.mirror!.handOver(ctx).then(() => (handed = true));
      await runUntil(clock, () => handed);
      const following = await reopenTab();
      await runUntil(clock, () => printed.length >= lines);
      await runUntil(clock, () => following.follower!.head >= (end.head ?? 0));
      return following;
    },
    /**
     * The tab that follows (`back`) takes the lease back: asks, waits until its copy holds the release, closes its
     * read-only harness and opens it again under the lease (resumed).
     */
    async takeBack(back: Awaited<ReturnType<typeof openTab>>) {
      let released: HandBack | undefined;
      void back.follower!.takeBack(ctx).then((answer) => (released = answer));
      await runUntil(clock, () => released !== undefined);
      back.follower!.stop();
      await back.harness.close(ctx);
      const tab = await reopenTab();
      if (!tab.harness.readOnly) tab.harness.resume();
      return { released: released!, tab };
    },
    /** The object's next instance (on Cloudflare the one after the alarm ended this one): a fresh end on the same copy and book. */
    async nextInstance() {
      end = await startObject();
    },
    /** Another device's link to the object (a tab that follows it elsewhere), delivered as the tab's is, never lost. */
    device() {
      const device: FollowLink = new FollowLink({
        clock,
        send: (frame) =>
          carried(
            () =>
              void end.receive(
                frame,
                (f) => carried(() => device.receive(f)),
                () => true,
                device,
              ),
          ),
      });
      device.connected();
      return device;
    },
    /** From now on the link loses and duplicates frames as `fate` says. */
    loseFrames() {
      link_.lossy = true;
    },
  };
}

/**
 * Calls `at` at the named points of the object's hand-back (object-lease.ts handBack): `"drain"` as the harness's drain
 * begins, `"stopping"` a microtask into it, `"before release"` and `"after release"` around the lease's release.
 */
export async function atHandBackPoints(world: Awaited<ReturnType<typeof comebackWorld>>, at: (point: string) => void): Promise<void> {
  const harness = await world.end.harness!;
  const handOver = harness.handOver.bind(harness);
  harness.handOver = (context, options) => {
    at("drain");
    const draining = handOver(context, options);
    queueMicrotask(() => at("stopping"));
    return draining;
  };
  const release = world.book.release.bind(world.book);
  world.book.release = async (...args: Parameters<typeof release>) => {
    at("before release");
    const released = await release(...args);
    at("after release");
    return released;
  };
}
