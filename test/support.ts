import fc from "fast-check";
import type { Json } from "../src/base/json.ts";
import { NotFound } from "../src/errors.ts";
import { type PendingSubscription, pendingSubscription } from "../src/host/pending-subscription.ts";
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
import { MAX_DEPTH_LIMIT } from "../src/limits.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { createManualClock, type ManualClock } from "../src/testing/clock.ts";

export const ctx = BACKGROUND_CONTEXT;

/**
 * What `promise` came to, read without awaiting it: `outcome` is `resolved` (default "watching") once it resolved, the
 * error's name once it rejected (with the error in `error`), undefined while it waits.
 */
export function settled(promise: Promise<unknown>, resolved = "watching"): { outcome?: string; error?: unknown } {
  const state: { outcome?: string; error?: unknown } = {};
  promise.then(
    () => (state.outcome = resolved),
    (error: unknown) => {
      state.outcome = error instanceof Error ? error.name : "?";
      state.error = error;
    },
  );
  return state;
}

/**
 * Watches that wait for their conversation, as a fake host holds them (decisions 0103, 0107): `wait(start)` is
 * answered with what `start()` returns once `come()` is called, and refused `NotFound` ("no longer watched") when
 * given up first; `size` counts the ones still waiting. The fake hosts of the watch tests (an endpoint served over
 * frames, a comlink worker's service, an evictable object instance) are built on it.
 */
export function waitingWatches() {
  const waiting = new Set<{ answer: () => void; refuse: (error: unknown) => void }>();
  return {
    wait<T>(start: () => T): PendingSubscription<T> {
      let entry!: { answer: () => void; refuse: (error: unknown) => void };
      const answered = new Promise<T>((resolve, reject) => {
        entry = { answer: () => resolve(start()), refuse: reject };
      });
      waiting.add(entry);
      return pendingSubscription(answered, () => {
        if (waiting.delete(entry)) entry.refuse(new NotFound("The conversation is no longer watched."));
      });
    },
    come() {
      for (const entry of [...waiting]) {
        waiting.delete(entry);
        entry.answer();
      }
    },
    get size() {
      return waiting.size;
    },
  };
}

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

/** Holds its invocation until it is stopped, telling `began` each task id whose phase began (counted live work). */
export function stallNoting(began: (id: number) => void) {
  return defineTask<null, { phase: "stall" }, null>({
    name: "test.stall",
    version: 1,
    initial: () => ({ phase: "stall" }),
    phases: {
      stall: async (task, runtime) => {
        began(task.id);
        await runtime.untilAborted();
        throw new Error("stopped");
      },
    },
    abort: async () => {},
  });
}

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

/**
 * Objects a stranger's JSON may hold that break code which turns a value into text, a number or a key before
 * checking its type: `String(x)` and `${x}` throw on `{"toString": null}`, `Number(x)` on `{"valueOf": null,
 * "toString": 1}`, `Object.assign(target, x)` sets target's prototype from an own `__proto__` key. Each is what
 * `JSON.parse` makes of its text (own members only), so it is also what a socket frame or a request body carries.
 */
const HOSTILE_TEXTS = [
  '{"toString": null}',
  '{"valueOf": null, "toString": 1}',
  '{"toString": {"toString": null}, "valueOf": {}}',
  '{"__proto__": {"type": "input", "content": "hi", "toString": null}}',
  '{"__proto__": null, "constructor": {"name": {"toString": null}}}',
  '{"constructor": null, "prototype": {"toString": null}, "hasOwnProperty": 1}',
  '{"toJSON": null, "then": 1, "length": {"toString": null}}',
  '[{"toString": null}]',
];
export const HOSTILE_OBJECTS: readonly Json[] = HOSTILE_TEXTS.map((text) => JSON.parse(text) as Json);

/** One of HOSTILE_OBJECTS, parsed afresh for each run (a test may change the value it was given). */
const hostileObject: fc.Arbitrary<Json> = fc.constantFrom(...HOSTILE_TEXTS).map((text) => JSON.parse(text) as Json);

/** Keys that name members of Object.prototype, mixed into hostileJson's objects with ordinary ones. */
const HOSTILE_KEYS = ["toString", "valueOf", "__proto__", "constructor", "prototype", "hasOwnProperty", "toJSON", "then", "length"];

/** An object from `entries` as JSON.parse makes it: every key an own member (`__proto__` too), the last value winning. */
function ownObject(entries: Array<[string, Json]>): Json {
  const object: Record<string, Json> = {};
  for (const [key, value] of entries) Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
  return object;
}

/** A value nested `levels` deep (arrays and objects in turn), printed by its depth in a counterexample. */
function deepJson(levels: number): Json {
  let value: Json = { toString: null } as unknown as Json;
  for (let level = 0; level < levels; level++) value = level % 2 ? { next: value } : [value];
  return Object.defineProperty(value as object, fc.toStringMethod, { value: () => `deepJson(${levels})` }) as Json;
}

/**
 * Any JSON a hostile caller may send (everything it holds round-trips through JSON text): fast-check's own
 * `fc.jsonValue()`, always mixed with `HOSTILE_OBJECTS`, objects whose keys name Object.prototype's members (holding
 * null, numbers and objects), nesting at the deepest any harness accepts (`MAX_DEPTH_LIMIT`) and one past it, and
 * strings at the lengths the protocol's checks bound (200, 10,000, 20,000) and beside them (the byte limits, 1 MB and
 * up, have properties of their own: limits-property.test.ts, snapshot-limit). `maxDepth` bounds the random part.
 * Used by every boundary property that took `fc.jsonValue()` (grep hostileJson).
 */
export function hostileJson(maxDepth = 3): fc.Arbitrary<Json> {
  const key = fc.oneof(fc.constantFrom(...HOSTILE_KEYS), fc.string({ maxLength: 6 }));
  const { tree } = fc.letrec<{ tree: Json }>((tie) => ({
    tree: fc.oneof(
      { depthSize: "small", maxDepth },
      fc.jsonValue({ maxDepth: 0 }) as fc.Arbitrary<Json>,
      hostileObject,
      fc.array(tie("tree"), { maxLength: 3 }),
      fc.array(fc.tuple(key, tie("tree")), { maxLength: 4 }).map(ownObject),
    ),
  }));
  return fc.oneof(
    { weight: 3, arbitrary: hostileObject },
    { weight: 4, arbitrary: tree },
    { weight: 2, arbitrary: fc.jsonValue({ maxDepth }) as fc.Arbitrary<Json> },
    {
      weight: 1,
      arbitrary: fc.oneof(
        fc.constantFrom(MAX_DEPTH_LIMIT - 1, MAX_DEPTH_LIMIT + 1).map(deepJson),
        fc.constantFrom<Json>(
          "x".repeat(200),
          "x".repeat(201),
          "x".repeat(10_001),
          "\u{1F600}".repeat(10_001), // 40 KB of UTF-8 in 20,002 UTF-16 units: past an error message's 20,000
        ),
      ),
    },
  );
}
