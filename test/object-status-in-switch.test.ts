/**
 * Decision 0145 (A; 0139's and 0143's "not done"). In the object's switch — from the start of the hand-back's drain to
 * the next instance — its pages asking for its status got the closed harness's last one: `ready`, `runs: "here"`, the
 * object's old epoch, while the tab already held the next. Now the status says `opening` there (a kind every page
 * knows: not ready), and a page's status watch sees the switch begin and end, in order, ending on the next instance's
 * status. A hand-back that fails ends the switch with the call: the watch sees `ready` again.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { socketEndpoint } from "../src/browser/socket.ts";
import { type HostEndpoint, hostEndpoint, type ServedEndpoint } from "../src/host/endpoint.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { atHandBackPoints, comebackWorld } from "./comeback-support.ts";
import { scriptedSockets } from "./socket-support.ts";
import { ctx, runUntil } from "./support.ts";

type World = Awaited<ReturnType<typeof comebackWorld>>;

/** A page's status watch over the real socket endpoint, served by the object's current instance (as its socket is). */
function statusWatch(world: World) {
  const served = new WeakMap<object, ServedEndpoint>();
  const current = () => {
    const service = world.copyService!.service;
    if (!served.has(service)) served.set(service, hostEndpoint(service));
    return served.get(service)!;
  };
  const object: HostEndpoint = {
    call: (method, args) => current().call(method, args),
    subscribe: (method, args, emit, lost) => current().subscribe(method, args, emit, lost),
    unsubscribe: (id) => current().unsubscribe(id),
  };
  const sockets = scriptedSockets(object);
  const timers = { setTimer: (fire: () => void, ms: number) => world.clock.setTimer(ms, fire), now: world.clock.now };
  const socket = socketEndpoint(() => sockets.connect(), { ...timers, random: () => 0.5 });
  const seen: HarnessStatus[] = [];
  void socket.subscribe("onStatus", [], (status) => void seen.push(status as HarnessStatus));
  return { seen, sockets };
}

/** What a page shows of a status: its kind, where the agent runs, the epoch. */
function shown(status: HarnessStatus | undefined) {
  if (status?.kind !== "ready") return status?.kind;
  return `ready ${status.runs} epoch ${status.epoch}`;
}

/** The statuses in the order seen, each run of the same told once. */
function changes(seen: HarnessStatus[]): Array<string | undefined> {
  return seen.map(shown).filter((status, i, all) => i === 0 || status !== all[i - 1]);
}

const POINTS = ["before", "drain", "stopping", "before release", "after release", "switch", "next"] as const;

describe("the object's status in its switch (decision 0145)", () => {
  it("property (S4): asked at any point of the switch the status is opening, ready again on the next instance; the watch sees the switch begin and end, in order", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...POINTS), async (point) => {
        const world = await comebackWorld({ to: 8, ttlMs: 60_000, declared: true, copyService: true });
        world.tab.harness.resume();
        await runUntil(world.clock, () => world.printed.length >= 2);
        const following = await world.handOverAndFollow(4);
        const watch = statusWatch(world);
        await runUntil(world.clock, () => watch.seen.length > 0);
        let asked: HarnessStatus | undefined;
        const ask = (at: string) => {
          if (at === point) asked = world.copyService!.service.status();
        };
        ask("before");
        // The named points of the object's hand-back (object-lease.ts handBack): the harness's drain, the release.
        await atHandBackPoints(world, ask);
        const { tab } = await world.takeBack(following);
        const epoch = tab.harness.lease!.epoch;
        ask("switch");
        // On Cloudflare the alarm ends the instance, which drops every socket: the page's watch is asked again there.
        await world.nextInstance();
        watch.sockets.drop();
        ask("next");
        await runUntil(world.clock, () => shown(watch.seen.at(-1)) === `ready elsewhere epoch ${epoch}`, 5_000);
        // Before: `ready here epoch 2` asked anywhere in the switch, and the watch never left it until the next instance.
        const expected = point === "before" ? "ready here epoch 2" : point === "next" ? "ready elsewhere" : "opening";
        expect(shown(asked)).toMatch(new RegExp(`^${expected}`));
        // The switch begins (opening) and ends on the next instance's copy, which says where the agent runs: elsewhere,
        // at the epoch its copy holds (the object's, then the tab's once its first push arrived) — never here again.
        const [first, begun, ...after] = changes(watch.seen);
        expect([first, begun]).toEqual(["ready here epoch 2", "opening"]);
        expect(after.every((status) => status?.startsWith("ready elsewhere epoch "))).toBe(true);
        expect(after.at(-1)).toBe(`ready elsewhere epoch ${epoch}`);
        await tab.harness.close(ctx);
      }),
      { numRuns: 12 },
    );
  }, 120_000);

  it("S4, S8 (0145's review, M1): three hand-backs refused before any drain (forged: the tab's copy past the object's log) move no page's status — it stays ready here, never opening (before: ready → opening → ready at each, and a page's usePageTool let its running tools go)", async () => {
    const world = await comebackWorld({ to: 8, ttlMs: 60_000, declared: true, copyService: true });
    world.tab.harness.resume();
    await runUntil(world.clock, () => world.printed.length >= 2);
    const following = await world.handOverAndFollow(4);
    const watch = statusWatch(world);
    await runUntil(world.clock, () => watch.seen.length > 0);
    const answers: string[] = [];
    for (let i = 0; i < 3; i++) {
      const frame = JSON.stringify({ type: "call", id: `h${i}`, topic: "lease", method: "handBack", args: ["tab", 1_000_000] });
      await world.end.receive(
        frame,
        (answer) => void answers.push(answer),
        () => true,
        "a forged tab",
      );
      await runUntil(world.clock, () => answers.length > i);
    }
    // Ordering, not time: the tab's own pushes go on after the refusals, and the watch has heard every status by then.
    const printed = world.printed.length;
    await runUntil(world.clock, () => world.printed.length > printed);
    expect(answers.map((answer) => JSON.parse(answer).error?.name)).toEqual(["LeaseNotHeld", "LeaseNotHeld", "LeaseNotHeld"]);
    expect(changes(watch.seen)).toEqual(["ready here epoch 2"]);
    expect(shown(world.copyService!.service.status())).toBe("ready here epoch 2");
    following.follower!.stop();
    await following.harness.close(ctx);
  });
});
