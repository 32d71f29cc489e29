import { afterEach, describe, expect, it, vi } from "vitest";
import { createRegistry, defineExtension, MemoryStorage } from "../src/index.ts";
import { ctx, openHarness, runUntil, stallNoting } from "./support.ts";

/**
 * Decision 0109: what a started task keeps while its phase is held (every running task at a reload, in front of the
 * last by id). `invoke` makes no promise for a run invocation (nobody waited on it).
 */

const begun: number[] = [];
const stall = stallNoting((id) => void begun.push(id));
const registry = () => createRegistry().install(defineExtension({ name: "test", tasks: [stall] }));
const HELD = 500;

afterEach(() => vi.unstubAllGlobals());

describe("a held phase's start (decision 0109)", () => {
  it("S4: starting 500 tasks whose phases are held makes one promise with an executor each (the held phase's untilAborted), not two", async () => {
    const { harness, clock } = await openHarness(new MemoryStorage(), { registry: registry() });
    const root = await harness.root(ctx);
    await root.commit((tx) => {
      for (let index = 0; index < HELD; index++) tx.createTask(stall, null);
    }, ctx);
    // `new Promise(executor)` calls made by the code under test (async functions and `then` make theirs natively).
    let made = 0;
    const Native = Promise;
    vi.stubGlobal(
      "Promise",
      new Proxy(Native, {
        construct(target, args) {
          made++;
          return Reflect.construct(target, args, target);
        },
        // `Promise.resolve(promise)` and the other statics run on the native constructor, as without the stub.
        get(target, key) {
          const value = Reflect.get(target, key);
          return typeof value === "function" ? value.bind(target) : value;
        },
      }),
    );
    harness.resume();
    await runUntil(clock, () => begun.length === HELD);
    vi.unstubAllGlobals();
    // 504 (500 and the test's own waits); before: 1,004 (invoke's promise for each, beside the phase's untilAborted).
    expect(made).toBeLessThan(HELD * 1.5);
    expect(made).toBeGreaterThanOrEqual(HELD);
    await harness.close(ctx);
  });
});
