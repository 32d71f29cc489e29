import { expect } from "vitest";
import { counterTask } from "../examples/counter-task.ts";
import { followObject } from "../src/browser/follow.ts";
import type { LeavingTicket } from "../src/browser/follow-options.ts";
import { LEAVING_SAID, LeavingSocket, saidIn } from "../src/browser/leaving.ts";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { createHost } from "../src/host/host.ts";
import type { HostOptions } from "../src/host/host-options.ts";
import { createRegistry, defineExtension, Harness, MemoryStorage, type Storage } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { socketTo } from "./follow-support.ts";
import { ctx, flush } from "./support.ts";

// The wiring of test/leave-silent-fork.test.ts, which uses it with no hooks (a tab's worker as worker.ts makes it: createHost + followObject, its
// link up but silent from the page's pagehide on), with hooks for the review of decision 0125: a call at the
// hand-over, the ownership of the database, the storage's opens, a failing onReady.

/** The counter's tick. */
export const EVERY_MS = 1_500;

function registry(place: string, prints: string[]) {
  const print = (line: string) => void prints.push(`${place} ${line}`);
  return createRegistry().install(defineExtension({ name: "example", tasks: [counterTask(print, { declared: true })] }));
}

/** A host (as worker.ts makes it) whose harness holds the object's lease and counts to 8, a tick every 1.5 s. */
export interface SilentTabHooks {
  readonly handedOver?: () => void;
  readonly ownership?: HostOptions["ownership"];
  readonly openStorage?: () => void;
  /** Told each time the host's harness is ready (1 at the first open): a throw fails that open. */
  readonly onReady?: (n: number, harness: Harness) => void;
  /** Given the host's holder listener too: the test names a holder as the object would. */
  readonly onHolder?: HostOptions["onHolder"];
  /** Given the host's rebuild listener too: the test asks for a rebuild as the follower would at a fork (decision 0127). */
  readonly rebuildAsked?: (listener: () => void) => void;
  /** The rebuild's `run` does not say it closes the copy (an app's own rebuild): the host closes it first (0132). */
  readonly rebuildKeepsCopy?: true;
  /** The object's lease term (default 60 s; infinite: a pinned lease, decision 0039). */
  readonly ttlMs?: number;
  /** The host's close awaits the follow's `drain()` before the storage closes, as the worker's does (review of 0133, M1). */
  readonly drainsAtClose?: true;
}

export async function silentTab(hook: SilentTabHooks = {}) {
  let readies = 0;
  const clock = createManualClock(1_000);
  const prints: string[] = [];
  let record: LeaseRecord = { epoch: 0 };
  const book = new LeaseBook({ clock, ttlMs: hook.ttlMs ?? 60_000, load: () => record, save: (next) => void (record = next) });
  const end = await ObjectEnd.start({
    place: "object",
    storage: new MemoryStorage(),
    book,
    clock,
    open: (storage: Storage, lease) => Harness.open(storage, { registry: registry("object", prints), clock, lease, resume: true }, ctx),
  });
  let silent = false;
  let dropsPushes = false;
  const frames: unknown[] = [];
  const socket = () =>
    socketTo(
      end,
      "worker",
      () => silent,
      (frame) => {
        frames.push(frame);
        return dropsPushes && typeof frame === "string" && frame.includes('"type":"push"');
      },
    );
  let worker = socket();
  /** How many times the link connected: after a drop (`drop()`), a connect gets a new socket, opened a task later. */
  let connects = 0;
  const connect = () => {
    if (connects++ > 0 && worker.isClosed()) {
      worker = socket();
      const opening = worker;
      setTimeout(() => opening.opened(), 0);
    }
    return worker.socket;
  };
  const follow = followObject({ url: "ws://object/follow", connect, place: "tab" }, clock);
  const tickets: LeavingTicket[] = [];
  follow.onLeavingTicket((ticket) => ticket && tickets.push(ticket));
  setTimeout(() => worker.opened(), 0);
  const storage = await openSqliteStorage({ vfs: "memory" });
  const host = createHost({
    database: "tab",
    openStorage: async () => {
      hook.openStorage?.();
      return storage;
    },
    harness: { registry: registry("tab", prints), clock, resume: true, lease: follow.lease, serverCalls: follow.serverCalls },
    onReady: (harness) => {
      follow.attach(harness);
      hook.onReady?.(++readies, harness);
    },
    leave: (handedOver) =>
      follow.leave(() => {
        handedOver();
        hook.handedOver?.();
      }),
    ...(hook.ownership ? { ownership: hook.ownership } : {}),
    ...(hook.drainsAtClose ? { beforeStorageClose: () => follow.drain() } : {}),
    takeBack: () => follow.takeBack(),
    ...(follow.rebuild
      ? {
          rebuild: {
            ...follow.rebuild,
            ...(hook.rebuildKeepsCopy ? { closesCopy: false } : {}),
            when: (listener: () => void) => {
              hook.rebuildAsked?.(listener);
              follow.rebuild!.when(listener);
            },
          },
        }
      : {}),
    onFork: (listener: () => void) => void follow.onFork(listener),
    onHolder: (listener) => {
      hook.onHolder?.(listener);
      follow.onHolder(listener);
    },
    pageCallsElsewhere: () => follow.pageCalls,
    now: () => clock.now(),
  });
  const tab = await host.ready;
  const root = await tab.root(ctx);
  await root.commit(
    (tx) =>
      tx.createTask(
        counterTask(() => {}),
        { to: 8, everyMs: EVERY_MS },
      ),
    ctx,
  );
  const step = async (ms: number) => {
    clock.advance(ms);
    await flush(8);
  };
  await step(0);
  await step(EVERY_MS); // ticks 1, 2 printed here
  // Everything stored is acknowledged (the step's commit after its print included) before the link goes silent.
  for (let i = 0; i < 3; i++) {
    await flush(16);
    await expect.poll(() => tickets.at(-1)?.position).toBe(tab.lease!.position);
  }
  return {
    clock,
    prints,
    record: () => record,
    /** The object's end (its harness, once it took the lease). */
    end,
    /** Where the object stands, as the worker tells its page (the acknowledged position while the tab holds the lease). */
    tickets,
    /** The worker's socket now (a new one after a drop and reconnect). */
    get worker() {
      return worker;
    },
    /** How many times the follow link connected. */
    connects: () => connects,
    /** The link's connection drops (frames held are lost); it reconnects on its own backoff, to a new socket. */
    drop: () => worker.disconnect(),
    follow,
    host,
    tab,
    storage,
    step,
    /** From now on every frame the worker sends is lost; its link stays up and still delivers the object's. */
    silence: () => void (silent = true),
    /** From now on the object's pushes never reach the tab (its answers do): a copy that follows stands still. */
    dropPushes: () => void (dropsPushes = true),
    /** Every frame the object sent the worker, dropped or not. */
    frames,
    /** The link delivers again (what was sent meanwhile stays lost). */
    restore() {
      worker.lose();
      silent = false;
    },
    /** The page's `pagehide`: its own socket says `lease.leaving`, its worker hears the word at once and leaves. */
    async pagehide() {
      const page = socketTo(end, "page");
      const leaving = new LeavingSocket(() => page.socket);
      leaving.told(tickets.at(-1)!);
      page.opened();
      await expect.poll(() => leaving.ready).toBe(true);
      leaving.told(tickets.at(-1)!);
      expect(leaving.leave(() => clock.now())).toBe(true);
      await flush(8);
      follow.leavingSaid?.(saidIn({ [LEAVING_SAID]: leaving.said })!.epoch, 0);
      return host.service.leave().then(
        () => "taken",
        (error: unknown) => error,
      );
    },
    async close() {
      await host.service.close();
      void follow.close();
      await (await end.harness)?.close(ctx);
    },
  };
}
