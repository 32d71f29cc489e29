import {
  BACKGROUND_CONTEXT,
  createRegistry,
  defineTask,
  Harness,
  type HarnessOptions,
  MemoryStorage,
  type Report,
  type Storage,
} from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { createManualClock, type ManualClock } from "../src/testing/clock.ts";

export const ctx = BACKGROUND_CONTEXT;

/** A task named `name` that completes ("ok") in its first step. */
export function doneTask(name: string) {
  return defineTask<unknown, { phase: "go" }, string>({
    name,
    version: 1,
    initial: () => ({ phase: "go" }),
    phases: {
      go: async (_t, runtime, context) =>
        runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "ok" } }), context),
    },
    abort: async () => {},
  });
}

/** Holds its invocation without committing until it is signalled: the live work a crash leaves `running`. */
export const stall = defineTask<null, { phase: "stall" }, null>({
  name: "test.stall",
  version: 1,
  initial: () => ({ phase: "stall" }),
  phases: { stall: (_task, runtime) => new Promise<void>((resolve) => runtime.signal.addEventListener("abort", () => resolve())) },
  abort: async () => {},
});

/** A storage backend under test; `fromImage` makes the copy a crash leaves behind. */
export interface Backend {
  name: string;
  create(): Promise<Storage>;
  fromImage(bytes: Uint8Array, options?: { readOnly?: boolean }): Promise<Storage>;
}

export const memoryBackend: Backend = {
  name: "MemoryStorage",
  create: async () => new MemoryStorage(),
  fromImage: async (bytes, options) => MemoryStorage.fromImage(bytes, options),
};

export const sqliteMemoryBackend: Backend = {
  name: "SQLite (sqlite-wasm, memory)",
  create: () => openSqliteStorage({ vfs: "memory" }),
  fromImage: (image, options) => openSqliteStorage({ vfs: "memory", image, readOnly: options?.readOnly }),
};

export const backends: Backend[] = [memoryBackend, sqliteMemoryBackend];

/** Lets queued promise work (commits, passes, phases) run. */
export async function flush(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setTimeout(resolve, 0));
}

/** Frames on their way between the places of a world on a manual clock (`wire`), by clock. */
const onTheWire = new WeakMap<ManualClock, { frames: number }>();

/**
 * A socket between two places of a world on `clock`: `carry(deliver)` delivers in a real macrotask (after `delayMs`),
 * as a socket does, and `runUntil` on `clock` lets every frame on its way arrive before it moves the clock. Before, it
 * moved the clock after two rounds whatever was on the way: a loaded machine's slower round trip met a lease's expiry
 * or a resend the test never meant (a 3 ms delivery failed 3 of test/snapshot-rebuild.test.ts's 4 cases).
 */
export function wire(clock: ManualClock, delayMs = 0): (deliver: () => void) => void {
  let wire = onTheWire.get(clock);
  if (!wire) onTheWire.set(clock, (wire = { frames: 0 }));
  const carried = wire;
  return (deliver) => {
    carried.frames++;
    setTimeout(() => {
      carried.frames--;
      deliver();
    }, delayMs);
  };
}

/**
 * Drives the manual clock until `done()` holds: flush, and when nothing moves and no frame of a `wire` on `clock` is
 * on its way, fire the next timer.
 */
export async function runUntil(clock: ManualClock, done: () => boolean | Promise<boolean>, limit = 2000): Promise<void> {
  for (let i = 0; i < limit; i++) {
    if (await done()) return;
    await flush(2);
    for (let round = 0; round < 200 && (onTheWire.get(clock)?.frames ?? 0) > 0; round++) await flush(1);
    if (await done()) return;
    clock.next();
  }
  throw new Error("runUntil: condition never held");
}

export interface Opened {
  harness: Harness;
  clock: ManualClock;
  reports: Report[];
}

/** Opens a harness with a manual clock and collected reports. */
export async function openHarness(storage: Storage, options: Partial<HarnessOptions> & { clock?: ManualClock } = {}): Promise<Opened> {
  const clock = options.clock ?? createManualClock(1_000);
  const reports: Report[] = [];
  const harness = await Harness.open(
    storage,
    { registry: options.registry ?? createRegistry(), ...options, clock, onReport: (report) => reports.push(report) },
    ctx,
  );
  return { harness, clock, reports };
}

/** A promise that never settles: the "process" is gone at this point. */
export function never(): Promise<never> {
  return new Promise(() => {});
}

/** An array nested `levels` deep around 1: `nested(2)` is `[[1]]`. */
export function nested(levels: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < levels; i++) value = [value];
  return value;
}

/**
 * Gates `storage.apply` (as it is now): after `hold()`, every transaction waits in flight until the returned release is
 * called, so the commits queued behind it form a group (decision 0026).
 */
export function holdApplies<S extends Storage>(storage: S): S & { hold(): () => void } {
  const held = storage as S & { hold(): () => void };
  const apply = storage.apply.bind(storage);
  let gate: Promise<void> | undefined;
  held.hold = () => {
    let open!: () => void;
    gate = new Promise<void>((resolve) => (open = resolve));
    return () => {
      gate = undefined;
      open();
    };
  };
  held.apply = async (batch) => {
    if (gate) await gate;
    return apply(batch);
  };
  return held;
}
