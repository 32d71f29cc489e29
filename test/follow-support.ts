import { counterTask } from "../examples/counter-task.ts";
import type { SocketLike } from "../src/browser/socket.ts";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import type { LoggedBatch } from "../src/follow/handover.ts";
import { FollowLink } from "../src/follow/link-client.ts";
import { Mirror, remoteArbiter } from "../src/follow/mirror.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import type { FollowAuthorize } from "../src/follow/object-end-options.ts";
import { createRegistry, defineExtension, Harness, MemoryStorage, type Storage } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import type { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { createManualClock, type ManualClock } from "../src/testing/clock.ts";
import { ctx, wire } from "./support.ts";

/**
 * A tab and its object in one process over an in-memory "socket" that delivers each frame on a later turn,
 * in order, while it is up (issue 27, decision 0031): the tab's harness under `remoteArbiter(link)` with a
 * `Mirror`; the object's end (`ObjectEnd`) with its `LeaseBook` and its copy on sqlite-wasm.
 */
export async function followWorld(
  options: {
    ttlMs?: number;
    to?: number;
    authorize?: FollowAuthorize;
    onLine?: (place: string, line: string) => void;
    /** The copy's `apply` (ObjectEndOptions.apply). */
    apply?: (storage: SqliteStorage, batch: LoggedBatch) => Promise<void>;
  } = {},
) {
  const clock = createManualClock(1_000);
  let record: LeaseRecord = { epoch: 0 };
  const book = new LeaseBook({
    clock,
    ttlMs: options.ttlMs ?? 5_000,
    load: () => record,
    save: (next) => {
      record = next;
    },
  });
  const printed: Array<[string, string]> = [];
  const registry = (place: string) =>
    createRegistry().install(
      defineExtension({
        name: "example",
        tasks: [
          counterTask((line) => {
            printed.push([place, line]);
            options.onLine?.(place, line);
          }),
        ],
      }),
    );
  const copy: SqliteStorage = await openSqliteStorage({ vfs: "memory" });
  const tabStorage: SqliteStorage = await openSqliteStorage({ vfs: "memory" });
  const sent = { toObject: [] as string[], toTab: [] as string[] };
  let up = true;
  /** Frames held on their way to the object (the object is slow), in order. */
  let held: string[] | undefined;
  const authorize = options.authorize ?? (() => true);
  const end = await ObjectEnd.start({
    place: "object",
    storage: copy,
    book,
    clock,
    open: (storage: Storage, lease) => Harness.open(storage, { registry: registry("object"), clock, lease, resume: true }, ctx),
    ...(options.apply ? { apply: (batch: LoggedBatch) => options.apply!(copy, batch) } : {}),
  });
  const carried = wire(clock);
  const toTab = (reply: string) => {
    if (!up) return;
    sent.toTab.push(reply);
    carried(() => {
      if (up) link.receive(reply);
    });
  };
  /** Delivers a frame to the object as the link would (tests send hostile ones through it too). */
  const deliver = (frame: unknown) => end.receive(frame, toTab, authorize);
  const link = new FollowLink({
    clock,
    send: (frame) => {
      if (!up) throw new Error("the socket is closed");
      sent.toObject.push(frame);
      if (held) held.push(frame);
      else
        carried(() => {
          if (up) void deliver(frame);
        });
    },
  });
  link.connected();
  const tab = await Harness.open(
    tabStorage,
    { registry: registry("tab"), clock, lease: { place: "tab", arbiter: remoteArbiter(link) } },
    ctx,
  );
  const mirror = new Mirror({ harness: tab, link, clock });
  const root = await tab.root(ctx);
  const taskId = await root.commit(
    (tx) =>
      tx.createTask(
        counterTask(() => {}),
        { to: options.to ?? 5 },
      ),
    ctx,
  );
  return {
    clock,
    book,
    record: () => record,
    printed,
    copy,
    tabStorage,
    tab,
    mirror,
    link,
    end,
    taskId,
    sent,
    deliver,
    /** Holds the frames to the object (they arrive, in order, when `hold(false)`). */
    hold(next: boolean) {
      const frames = held ?? [];
      held = next ? frames : undefined;
      if (!next) for (const frame of frames) carried(() => void deliver(frame));
    },
    /** Takes the socket down (frames in flight are lost) or brings it up again. */
    setUp(next: boolean) {
      up = next;
      if (next) link.connected();
      else link.disconnected();
    },
  };
}

/** What a storage holds, as comparable rows (the copy must equal the tab's, less the tab's log tail). */
/**
 * An object's end over an in-memory copy, its lease book in memory (60 s leases): the object's harness, when it
 * takes the lease, has an empty registry. `record()` reads the book's record.
 */
export async function memoryObjectEnd(clock: ManualClock) {
  let record: LeaseRecord = { epoch: 0 };
  const book = new LeaseBook({ clock, ttlMs: 60_000, load: () => record, save: (next) => void (record = next) });
  const storage = new MemoryStorage();
  const end = await ObjectEnd.start({
    place: "object",
    storage,
    book,
    clock,
    open: (storage: Storage, lease) => Harness.open(storage, { registry: createRegistry(), clock, lease }, ctx),
  });
  return { end, book, storage, record: () => record };
}

/**
 * An object's end whose lease another tab (`tab-x`) holds for good at `epoch`, over `copy`: it serves that copy to a
 * tab that follows (decisions 0038, 0058) and never takes the lease itself.
 */
export function servingObjectEnd(copy: Storage, clock: ManualClock, epoch: number): Promise<ObjectEnd> {
  let record: LeaseRecord = { epoch, holder: "tab-x", expiresAt: Number.MAX_SAFE_INTEGER };
  return ObjectEnd.start({
    place: "object",
    storage: copy,
    book: new LeaseBook({ clock, ttlMs: 60_000, load: () => record, save: (next) => void (record = next) }),
    clock,
    watchExpiry: false,
    open: () => Promise.reject(new Error("the object does not take the lease here")),
  });
}

/**
 * A tab's link to `end` over an in-memory socket that carries each frame on a later turn, both ways. `keep` sees each
 * frame the tab sends, parsed (its `topic` and `method` for a call, its `args`), and may lose it (false).
 */
export function linkToObject(
  end: ObjectEnd,
  clock: ManualClock,
  keep: (message: { type: string; topic?: string; method?: string; args?: unknown[] }) => boolean = () => true,
): FollowLink {
  const link: FollowLink = new FollowLink({
    clock,
    send: (frame) => {
      if (!keep(JSON.parse(frame))) return;
      setTimeout(
        () =>
          void end.receive(
            frame,
            (reply) => setTimeout(() => link.receive(reply), 0),
            () => true,
            "the tab's socket",
          ),
        0,
      );
    },
  });
  return link;
}

export async function rows(storage: SqliteStorage) {
  return {
    tasks: await storage.query("SELECT id, status, record FROM tasks ORDER BY id"),
    entries: await storage.query("SELECT id, record FROM entries ORDER BY id"),
    documents: await storage.query("SELECT scope, key, record FROM documents ORDER BY scope, key"),
    epochs: await storage.query("SELECT epoch, start FROM pi_durable_epochs ORDER BY epoch"),
    head: (await storage.load()).log,
  };
}

/**
 * An in-memory socket to `end` on a connection of its own; `opened()` fires its open event. While `hold()` says so the
 * frames it sends wait (a worker busy in a long stretch: its socket sends nothing) until `unhold()` sends them in order.
 */
export function socketTo(
  end: ObjectEnd,
  connection: string,
  hold: () => boolean = () => false,
  drop: (frame: unknown) => boolean = () => false,
) {
  const sent: string[] = [];
  const held: string[] = [];
  const listeners: Record<string, Array<(event?: { data: unknown }) => void>> = { open: [], message: [], close: [], error: [] };
  let closed = false;
  const deliver = (frame: string) =>
    setTimeout(
      () =>
        void end.receive(
          frame,
          (reply) =>
            setTimeout(() => {
              if (drop(reply)) return; // lost on its way to the tab
              for (const listener of listeners.message!) listener({ data: reply });
            }, 0),
          () => true,
          connection,
        ),
      0,
    );
  const socket = {
    send(frame: string) {
      if (closed) throw new Error("closed");
      sent.push(frame);
      if (hold()) held.push(frame);
      else deliver(frame);
    },
    close() {
      closed = true;
    },
    addEventListener(type: string, listener: (event?: { data: unknown }) => void) {
      listeners[type]!.push(listener);
    },
  } as SocketLike;
  const opened = () => {
    for (const listener of listeners.open!) listener();
  };
  const unhold = () => {
    for (const frame of held.splice(0)) deliver(frame);
  };
  /** Loses the frames held so far (a link up but silent: they never arrive); how many. */
  const lose = () => held.splice(0).length;
  /** The connection drops (its close event): what is held is lost, nothing more is sent on it. */
  const disconnect = () => {
    closed = true;
    lose();
    for (const listener of listeners.close!) listener();
  };
  return { socket, sent, opened, unhold, lose, disconnect, isClosed: () => closed };
}
