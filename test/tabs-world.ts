/**
 * A world of tabs for the hand-over sweep (test/tabs-sweep.test.ts): three tabs' workers on one database and
 * the follower tab's page, in one Node process, where every message between tabs and every commit is a step
 * the sweep can stop at and kill the tab that leads.
 *
 * - Each tab is a `Process`. Code runs as the process that started it (AsyncLocalStorage follows it through
 *   promises, lock grants and message handlers), so each BroadcastChannel belongs to the process that opened it.
 * - `SweepChannel` stands in for BroadcastChannel: one message is delivered per macrotask, in the order they
 *   were posted, to the channels of that name open when it was posted. A dead process's channels neither send
 *   nor receive.
 * - Each worker's storage is a MemoryStorage on the "disk" image. A death copies the image at that instant
 *   and freezes the storage (no call answers again: the dead worker's harness cannot reach the disk), releases
 *   the worker's life lock (how its followers learn of it) and grants the database to the next worker in line.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { serveTabs } from "../src/browser/tabs/leader.ts";
import { HostClient } from "../src/host/client.ts";
import { hostEndpoint } from "../src/host/endpoint.ts";
import { createHost, type HostMethod } from "../src/host/host.ts";
import type { Ownership } from "../src/host/ownership.ts";
import type { HarnessService, HarnessStatus } from "../src/host/protocol.ts";
import { MemoryStorage, type Registry, type Storage } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { Locks } from "./tabs-support.ts";

export class Process {
  dead = false;
  constructor(readonly name: string) {}
}

const running = new AsyncLocalStorage<Process>();
const never = new Promise<never>(() => {});
const macrotask = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Where a death may fall: before or after the `at`-th step (0-based) counted since `World.count()`. */
export interface Death {
  at: number;
  side: "before" | "after";
}

/** One tab's worker: its host, and what the sweep needs to kill it. */
export interface Worker {
  process: Process;
  host: HarnessService;
  /** The database is this worker's now (the lock's queue moved to it). */
  grant(): void;
  lifeLock: string;
}

export interface WorldSetup {
  registry: () => Registry;
  methods: Record<string, HostMethod>;
  /** How many tabs' workers, in the lock's queue order; the last one's tab is the follower whose page calls. */
  workers: number;
  /** A planted fault: what the leaders serve to other tabs instead of their host (to show the sweep catches it). */
  served?: (host: HarnessService) => HarnessService;
}

let current: World | undefined;

/** BroadcastChannel as the world delivers it (installed on globalThis while a world runs). */
export class SweepChannel {
  onmessage: ((event: { data: unknown }) => void) | null = null;
  readonly owner: Process;
  closed = false;
  readonly #world: World;

  constructor(readonly name: string) {
    const owner = running.getStore();
    if (!owner || !current) throw new Error(`a channel ${name} was opened outside a process of the world`);
    this.owner = owner;
    this.#world = current;
    this.#world.open(this);
  }

  postMessage(message: unknown): void {
    if (!this.closed && !this.owner.dead) this.#world.post(this, structuredClone(message));
  }

  close(): void {
    this.closed = true;
    this.#world.shut(this);
  }
}

interface Delivery {
  from: SweepChannel;
  to: SweepChannel;
  data: unknown;
}

export class World {
  readonly locks = new Locks();
  readonly database = `sweep-${crypto.randomUUID()}`;
  readonly workers: Worker[] = [];
  /** The follower tab's page: a client over its own worker (the last one) and, through the broker, the leader's. */
  client!: HostClient;
  /** Steps counted since `count()`, and what each was. */
  readonly steps: string[] = [];
  #counting = false;
  readonly #deaths = new Map<string, () => Promise<void>>();
  #disk: Uint8Array = new Uint8Array();
  #diskIsEmpty = true;
  /** The open storages, by process: the last live one is the database as the leader sees it. */
  readonly #storages: Array<{ owner: Process; inner: MemoryStorage }> = [];
  readonly #channels = new Map<string, Set<SweepChannel>>();
  readonly #queue: Delivery[] = [];
  #pumping = false;
  /** The death that killed each dead worker was at this many steps. */
  readonly deathSteps: number[] = [];

  constructor(readonly setup: WorldSetup) {}

  /** Starts the tabs: the first worker owns the database, the others wait in line; the follower's page opens. */
  start(): void {
    const previous = current;
    if (previous) throw new Error("one world at a time");
    current = this;
    for (let index = 0; index < this.setup.workers; index++) this.workers.push(this.#worker(index));
    const follower = this.workers.at(-1)!;
    running.run(follower.process, () => {
      this.client = new HostClient(tabsEndpoint(hostEndpoint(follower.host)));
    });
  }

  /** Ends the world (its processes are left to the garbage collector: nothing of them answers again). */
  stop(): void {
    for (const worker of this.workers) worker.process.dead = true;
    current = undefined;
  }

  /** Runs `body` as the follower tab's page. */
  asFollower<T>(body: () => T): T {
    return running.run(this.workers.at(-1)!.process, body);
  }

  /** From now on every delivered message and every commit is a step; `deaths` kill the leader of the moment. */
  count(deaths: Death[]): void {
    this.#counting = true;
    for (const death of deaths) this.#deaths.set(`${death.at}:${death.side}`, () => this.#killLeader());
  }

  /** The database as it is now: the live leader's storage, or the disk a dead one left. */
  storage(): Storage {
    const live = this.#storages.filter((storage) => !storage.owner.dead).at(-1);
    if (live) return live.inner;
    return this.#diskIsEmpty ? new MemoryStorage() : MemoryStorage.fromImage(this.#disk);
  }

  /** Whether messages are still in flight. */
  get busy(): boolean {
    return this.#queue.length > 0 || this.#pumping;
  }

  /** Lets the world run until `done()` holds and nothing is in flight for a few macrotasks; false if it never does. */
  async settle(done: () => boolean, rounds = 20_000): Promise<boolean> {
    let still = 0;
    for (let round = 0; round < rounds; round++) {
      await macrotask();
      still = done() && !this.busy ? still + 1 : 0;
      if (still >= 5) return true;
    }
    return false;
  }

  untilStatus(test: (status: HarnessStatus) => boolean): Promise<boolean> {
    let seen = false;
    const stop = this.client.onStatus((status) => {
      if (test(status)) seen = true;
    });
    return this.settle(() => seen).finally(() => stop());
  }

  open(channel: SweepChannel): void {
    const open = this.#channels.get(channel.name) ?? new Set();
    this.#channels.set(channel.name, open);
    open.add(channel);
  }

  shut(channel: SweepChannel): void {
    this.#channels.get(channel.name)?.delete(channel);
  }

  post(from: SweepChannel, data: unknown): void {
    for (const to of this.#channels.get(from.name) ?? []) if (to !== from) this.#queue.push({ from, to, data });
    if (!this.#pumping) void this.#pump();
  }

  async #pump(): Promise<void> {
    this.#pumping = true;
    try {
      for (let delivery = this.#queue.shift(); delivery; delivery = this.#queue.shift()) {
        await macrotask();
        const deliverable = () => !delivery!.to.closed && !delivery!.to.owner.dead && !delivery!.from.owner.dead;
        if (!deliverable()) continue;
        const { to, data } = delivery;
        await this.#step(`${delivery.from.owner.name} → ${to.owner.name}: ${describe(data)}`, () => {
          if (deliverable()) running.run(to.owner, () => to.onmessage?.({ data }));
        });
      }
    } finally {
      this.#pumping = false;
    }
  }

  /** One step: a death planned before it, the step, a death planned after it. */
  async #step<T>(what: string, body: () => T | Promise<T>): Promise<T> {
    if (!this.#counting) return body();
    const at = this.steps.length;
    this.steps.push(what);
    await this.#deaths.get(`${at}:before`)?.();
    const result = await body();
    await this.#deaths.get(`${at}:after`)?.();
    return result;
  }

  /** The worker that holds the database (or waits first in line for it) dies. */
  async #killLeader(): Promise<void> {
    const victim = this.workers.find((worker) => !worker.process.dead);
    if (!victim || victim === this.workers.at(-1)) throw new Error("the sweep kills only the tabs before the follower's");
    victim.process.dead = true;
    this.deathSteps.push(this.steps.length);
    const storage = this.#storages.find((candidate) => candidate.owner === victim.process);
    if (storage) {
      // The image at this instant is what the disk holds (the frozen storage lets nothing else reach it).
      this.#disk = await storage.inner.exportImage();
      this.#diskIsEmpty = false;
    }
    this.locks.die(victim.lifeLock);
    this.workers.find((worker) => !worker.process.dead)?.grant();
  }

  #worker(index: number): Worker {
    const process = new Process(`tab${index + 1}`);
    const lifeLock = `life:${this.database}:${index}`;
    let grant!: () => void;
    const granted = new Promise<void>((resolve) => (grant = resolve));
    const ownership: Ownership = {
      async acquire(waiting) {
        if (index > 0) {
          waiting();
          await granted;
        }
        return () => {};
      },
      cancel: () => {},
      requestTakeover: () => {},
      onTakeoverRequest: () => {},
      lifeLock: async () => lifeLock,
    };
    const host = running.run(process, () => {
      void this.locks.request(lifeLock, () => new Promise<never>(() => {}));
      const served = createHost({
        database: this.database,
        openStorage: async () => this.#storageOf(process),
        harness: { registry: this.setup.registry(), clock: createManualClock(1_000), resume: true },
        ownership,
        methods: this.setup.methods,
        now: () => 0,
      });
      serveTabs(this.setup.served?.(served.service) ?? served.service, this.database);
      return served.service;
    });
    return { process, host, grant, lifeLock };
  }

  /** A worker's view of the disk: answers nothing once its process died, and counts each commit as a step. */
  #storageOf(owner: Process): Storage {
    const inner = this.#diskIsEmpty ? new MemoryStorage() : MemoryStorage.fromImage(this.#disk);
    this.#storages.push({ owner, inner });
    const read =
      <A extends unknown[], T>(method: (...args: A) => Promise<T>) =>
      (...args: A): Promise<T> =>
        owner.dead ? never : method.apply(inner, args);
    return {
      get readOnly() {
        return inner.readOnly;
      },
      label: inner.label,
      load: read(inner.load),
      apply: async (batch) => {
        if (owner.dead) return never;
        await this.#step(`${owner.name} commits ${describeBatch(batch)}`, async () => {
          if (!owner.dead) await inner.apply(batch);
        });
        return owner.dead ? never : undefined;
      },
      getTask: read(inner.getTask),
      listTasks: read(inner.listTasks),
      getConversation: read(inner.getConversation),
      listConversations: read(inner.listConversations),
      listEntries: read(inner.listEntries),
      getEntry: read(inner.getEntry),
      getDocument: read(inner.getDocument),
      listDocuments: read(inner.listDocuments),
      getSubmission: read(inner.getSubmission),
      findSubmission: read(inner.findSubmission),
      listSubmissions: read(inner.listSubmissions),
      query: read(inner.query),
      exportImage: read(inner.exportImage),
      close: read(inner.close),
    };
  }
}

function describe(data: unknown): string {
  const message = data as { type?: string; method?: string } | undefined;
  return [message?.type, message?.method].filter(Boolean).join(" ") || "message";
}

function describeBatch(batch: Parameters<Storage["apply"]>[0]): string {
  const parts = [
    ...batch.tasks.map((task) => `task ${task.id} ${task.state.status}`),
    ...batch.entries.map((entry) => `entry ${entry.kind}`),
    ...batch.submissions.map((submission) => `submission ${submission.status}`),
    ...batch.conversations.map((conversation) => `conversation ${conversation.id}`),
    ...batch.documents.map((document) => `document ${document.key}`),
  ];
  return parts.join(", ") || "(empty)";
}
