import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { errorShape } from "../src/follow/object-door.ts";
import { encodeFollowMessage } from "../src/follow/wire.ts";
import { HarnessClosed } from "../src/index.ts";
import { comebackWorld } from "./comeback-support.ts";
import { rows } from "./follow-support.ts";
import { ctx, runUntil } from "./support.ts";

// The tab's first push after a take-back (runHere, decision 0130) can reach the object while it is between harnesses:
// its own closed at the hand-back, its copy not following yet (on Cloudflare the next instance does). The object's copy
// answered `HarnessClosed` and the tab's mirror took it as a refusal for good: no resend, no round after a reconnect, and
// the running task's declared effect (it waits for the acknowledgement) faulted it with "Harness is closed".

/**
 * A tab and its object; the object's copy refuses `refusals` pushed transactions with `HarnessClosed` after it handed the
 * lease back (its switch), then stores them again. The tab counts to `to` with each print a declared effect.
 */
async function switchingWorld(refusals: number, to = 8, away = 2, back = 4) {
  const switching = { on: false, left: refusals, refused: 0 };
  const world = await comebackWorld({
    to,
    ttlMs: 60_000,
    declared: true,
    onHandedBack: () => void (switching.on = true),
    objectApply: (copy) => async (batch) => {
      if (switching.on && switching.left > 0) {
        switching.left--;
        switching.refused++;
        throw new HarnessClosed();
      }
      await copy.apply(batch);
    },
  });
  /** The names of the refusals the tab heard from the object. */
  const heard: string[] = [];
  world.link.onReply((reply) => void (reply.type === "refused" && heard.push(String(reply.error.name))));
  world.tab.harness.resume();
  await runUntil(world.clock, () => world.printed.length >= away);
  const following = await world.handOverAndFollow(back);
  const { tab } = await world.takeBack(following);
  return { world, tab, switching, heard };
}

async function finishes(refusals: number, to = 8, back = 4, olderObject = false) {
  const { world, tab, switching, heard } = await switchingWorld(refusals, to, 2, back);
  expect(tab.harness.lease).toMatchObject({ place: "tab", epoch: 3 });
  if (olderObject) {
    // An object from before this fix answers its switch with HarnessClosed itself: the tab hears that refusal.
    const error = errorShape(new HarnessClosed());
    world.link.receive(encodeFollowMessage({ type: "refused", head: world.end.head, error }));
    switching.refused++;
  }
  await runUntil(world.clock, async () => (await tab.harness.getTask(world.taskId, ctx))?.state.status === "terminal", 5_000);
  // Before: { status: "faulted", error: "Harness is closed. Open a new one on the same storage to continue." }.
  expect((await tab.harness.getTask(world.taskId, ctx))?.state).toMatchObject({ outcome: { status: "completed" } });
  expect(switching.refused).toBeGreaterThan(0); // the push did land while the object switched
  // The object's own switch is answered as one that passes (before: HarnessClosed, which the mirror took as final).
  if (!olderObject) expect(heard.length > 0 && heard.every((name) => name === "NotReady")).toBe(true);
  expect(tab.mirror!.refused).toBeUndefined();
  await runUntil(world.clock, () => tab.mirror!.acknowledged >= tab.harness.lease!.position, 5_000);
  // Each tick once; the object holds every position, the same transaction at each (nothing pushed twice unlike).
  expect(world.printed.map(([, line]) => line)).toEqual(Array.from({ length: to }, (_, n) => `tick ${n + 1}`));
  expect(await rows(world.copy)).toEqual(await rows(world.tabStorage));
  await tab.harness.close(ctx);
}

describe("a push that reaches the object between its harnesses after a take-back (decision 0130)", () => {
  it("S4/S12: the object answers it NotReady, the mirror pushes again; the tab's task completes and the object ends with every position", async () => {
    await finishes(1);
  });

  it("S4: several pushes in a row during the switch: each answered NotReady, the last one stored", async () => {
    await finishes(3);
  });

  it("S4: the object's HarnessClosed is no refusal either (an object that still answers it): the mirror keeps pushing", async () => {
    await finishes(0, 8, 4, true);
  });

  it("property: however many pushed transactions the object's switch refuses and wherever the tab stands, the task completes, every tick once, the copies equal", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 3, max: 6 }), async (refusals, back) => {
        await finishes(refusals, 8, back);
      }),
      { numRuns: 8 },
    );
  }, 60_000);

  it("S4/S12 (review of 0130, L1): on the real copy service (still holding after the hand-back) the push is answered NotReady, and the object's next instance stores the resend", async () => {
    const world = await comebackWorld({ to: 8, ttlMs: 60_000, declared: true, copyService: true });
    const heard: string[] = [];
    world.link.onReply((reply) => void (reply.type === "refused" && heard.push(String(reply.error.name))));
    world.tab.harness.resume();
    await runUntil(world.clock, () => world.printed.length >= 2);
    const following = await world.handOverAndFollow(4);
    const { tab } = await world.takeBack(following);
    expect(tab.harness.lease).toMatchObject({ place: "tab", epoch: 3 });
    // The instance that handed back: its copy service still says `holding` and throws HarnessClosed; answered NotReady.
    await runUntil(world.clock, () => heard.length > 0);
    expect(heard.every((name) => name === "NotReady")).toBe(true); // before 7e28ce0: HarnessClosed, the task faulted
    await world.nextInstance(); // on Cloudflare the alarm ends the instance that handed back; the next one follows
    await runUntil(world.clock, async () => (await tab.harness.getTask(world.taskId, ctx))?.state.status === "terminal", 5_000);
    expect((await tab.harness.getTask(world.taskId, ctx))?.state).toMatchObject({ outcome: { status: "completed" } });
    expect(tab.mirror!.refused).toBeUndefined();
    await runUntil(world.clock, () => tab.mirror!.acknowledged >= tab.harness.lease!.position, 5_000);
    expect(world.printed.map(([, line]) => line)).toEqual(Array.from({ length: 8 }, (_, n) => `tick ${n + 1}`));
    expect(await rows(world.copy)).toEqual(await rows(world.tabStorage));
    await tab.harness.close(ctx);
  });
});
