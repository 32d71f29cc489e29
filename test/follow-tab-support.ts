/**
 * A tab's follow link as `serveHarness({ follow })` wires it (src/browser/follow.ts), to a real `ObjectEnd` over an
 * in-memory socket that can go offline; the tab's database can crash (its image reopened). Decision 0039's tests.
 */
import { followObject } from "../src/browser/follow.ts";
import type { SocketLike } from "../src/browser/socket.ts";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { createRegistry, Harness, MemoryStorage, type Storage } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import type { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { ctx } from "./support.ts";

type Listener = (event?: { data: unknown }) => void;

export async function followTabWorld(options: { ttlMs?: number } = {}) {
  const clock = createManualClock(1_000);
  let record: LeaseRecord = { epoch: 0 };
  const book = new LeaseBook({ clock, ttlMs: options.ttlMs ?? 3_000, load: () => record, save: (next) => void (record = next) });
  const copy = new MemoryStorage();
  let objectHarness: Harness | undefined;
  const end = await ObjectEnd.start({
    place: "object",
    storage: copy,
    book,
    clock,
    open: async (storage: Storage, lease) =>
      (objectHarness = await Harness.open(storage, { registry: createRegistry(), clock, lease, resume: true }, ctx)),
  });
  let online = true;
  /** Every frame the object received, in order. */
  const received: string[] = [];
  const sockets: Array<{ fire(type: string, event?: { data: unknown }): void }> = [];
  const connect = (): SocketLike => {
    const listeners: Record<string, Listener[]> = { open: [], message: [], close: [], error: [] };
    let alive = true;
    const fire = (type: string, event?: { data: unknown }) => {
      for (const listener of listeners[type]!) listener(event);
    };
    const socket = {
      send(frame: string) {
        if (!alive) throw new Error("closed");
        received.push(frame);
        setTimeout(
          () =>
            void end.receive(
              frame,
              (reply) => setTimeout(() => alive && fire("message", { data: reply }), 0),
              () => true,
            ),
          0,
        );
      },
      close() {
        alive = false;
      },
      addEventListener(type: string, listener: Listener) {
        listeners[type]!.push(listener);
      },
    } as unknown as SocketLike;
    sockets.push({
      fire: (type, event) => {
        if (type === "close") alive = false;
        fire(type, event);
      },
    });
    setTimeout(() => {
      if (online) return fire("open");
      alive = false;
      fire("error");
    }, 0);
    return socket;
  };
  let tabStorage: SqliteStorage = await openSqliteStorage({ vfs: "memory" });
  /** Opens the tab's harness under the object's lease on its storage (a page load), its follow link attached. */
  const openTab = async () => {
    const follow = followObject({ url: "ws://object/follow", connect }, clock);
    let heard = 0;
    follow.onFork(() => heard++);
    const harness = await Harness.open(tabStorage, { registry: createRegistry(), clock, lease: follow.lease }, ctx);
    follow.attach(harness);
    return { follow, harness, heard: () => heard };
  };
  const goOffline = () => {
    online = false;
    sockets.at(-1)?.fire("close");
  };
  /** The tab crashes: its database as it is on disk, opened by the next page load (DESIGN §5). */
  const crash = async () => {
    tabStorage = await openSqliteStorage({ vfs: "memory", image: await tabStorage.exportImage() });
  };
  return {
    clock,
    book,
    copy,
    received,
    get tabStorage() {
      return tabStorage;
    },
    openTab,
    crash,
    goOffline,
    connect,
    goOnline: () => void (online = true),
    object: () => objectHarness,
  };
}
