/**
 * Two tabs' hosts on one database (decision 0140): a disk both open in turn (a `MemoryStorage` image, saved at each
 * close) and a one-owner lock with Web Locks' steal as the browser's `webLocksOwnership` uses it — the asker goes first
 * in line and the owner is asked to let go (it closes, lets go, and queues again behind it).
 */
import type { ConversationViewUpdate } from "../src/agent/view/view.ts";
import { ConversationViewStore } from "../src/agent/view/view-store.ts";
import type { Harness } from "../src/harness.ts";
import { createHost } from "../src/host/host.ts";
import type { Ownership } from "../src/host/ownership.ts";
import { createRegistry, MemoryStorage } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { ctx } from "./support.ts";

interface Entry {
  name: string;
  grant(): void;
  cancel(): void;
}

/** One lock for the database: one owner at a time, a queue, a steal. */
class OneOwner {
  holder: { name: string; letGo(): void } | undefined;
  readonly queue: Entry[] = [];

  ownership(name: string): Ownership {
    let onTakeover = () => {};
    let waitingNow: Entry | undefined;
    return {
      acquire: (waiting) =>
        new Promise((resolve) => {
          const release = () => {
            if (this.holder?.name !== name) return;
            this.holder = undefined;
            this.queue.shift()?.grant();
          };
          const grant = () => {
            waitingNow = undefined;
            this.holder = { name, letGo: () => onTakeover() };
            resolve(release);
          };
          if (!this.holder) return grant();
          waiting();
          waitingNow = { name, grant, cancel: () => resolve(undefined) };
          this.queue.push(waitingNow);
        }),
      cancel: () => {
        const entry = waitingNow;
        waitingNow = undefined;
        if (!entry) return;
        this.queue.splice(this.queue.indexOf(entry), 1);
        entry.cancel();
      },
      requestTakeover: () => {
        const entry = waitingNow;
        if (!entry || !this.holder) return;
        this.queue.splice(this.queue.indexOf(entry), 1);
        this.queue.unshift(entry);
        this.holder.letGo();
      },
      onTakeoverRequest: (handler) => void (onTakeover = handler),
      lifeLock: async () => undefined,
    };
  }
}

/** The database's disk and lock, and the tabs' hosts on it. */
export function takeoverWorld() {
  let image: Uint8Array | undefined;
  const lock = new OneOwner();
  const clock = createManualClock(1_000);
  /** Opens of the disk that fail (the next `n`): an open after a takeover that cannot read the database. */
  let failingOpens = 0;

  /** A tab's host; `rebuilds`: its storage can be rebuilt, each rebuild's `run` held until the test lets it end. */
  const tab = (name: string, rebuilds = false) => {
    let harness: Harness | undefined;
    let opens = 0;
    let askRebuild: (() => void) | undefined;
    let endRun: (() => void) | undefined;
    const served = createHost({
      database: "db",
      openStorage: async () => {
        opens += 1;
        if (failingOpens > 0) {
          failingOpens -= 1;
          throw new Error(`${name}'s open ${opens} failed`);
        }
        const inner = image ? MemoryStorage.fromImage(image) : new MemoryStorage();
        const close = inner.close.bind(inner);
        inner.close = async () => {
          image = await inner.exportImage();
          await close();
        };
        return inner;
      },
      harness: { registry: createRegistry(), clock },
      ownership: lock.ownership(name),
      onReady: (opened) => void (harness = opened),
      now: () => clock.now(),
      ...(rebuilds
        ? {
            rebuild: {
              when: (listener: () => void) => void (askRebuild = listener),
              run: (_storage: unknown, closeCopy: () => Promise<void>) =>
                closeCopy().then(() => new Promise<void>((resolve) => (endRun = resolve))),
              closesCopy: true,
            },
          }
        : {}),
    });
    return {
      name,
      served,
      service: served.service,
      /** The harness open now (undefined unless ready). */
      harness: () => (harness && !harness.closed && served.service.status().kind === "ready" ? harness : undefined),
      /** Starts a rebuild (its `run` waits for `endRebuild`). */
      rebuild: () => askRebuild!(),
      endRebuild: () => endRun!(),
      /** Appends a note to the root conversation (this tab must have the database open). */
      async note(payload: number) {
        const open = this.harness();
        if (!open) throw new Error(`${name} has no harness open`);
        await (await open.root(ctx)).commit((tx) => void tx.appendEntry({ kind: "app.note", payload }), ctx);
      },
    };
  };

  return {
    lock,
    clock,
    tab,
    failOpens: (n: number) => void (failingOpens = n),
  };
}

export type Tab = ReturnType<ReturnType<typeof takeoverWorld>["tab"]>;

/** A page's watch on `service`: every update it heard applied to a store as the page's view does, and its `lost`. */
export function pageWatch(service: Tab["service"], conversationId: number) {
  const updates: ConversationViewUpdate[] = [];
  const lost: Error[] = [];
  const store = new ConversationViewStore();
  const subscribed = Promise.resolve(
    service.watchConversation(
      conversationId,
      (update) => {
        updates.push(update);
        store.apply(update);
      },
      (error) => void lost.push(error),
    ),
  );
  return {
    updates,
    lost,
    store,
    subscribed,
    notes: () => store.state?.entries.filter((entry) => entry.kind === "app.note").map((entry) => entry.payload) ?? [],
    ids: () => store.state?.entries.map((entry) => entry.id) ?? [],
  };
}
