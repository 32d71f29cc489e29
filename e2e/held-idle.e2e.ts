import { describe, expect, it } from "vitest";
import { browserPerTest } from "./support/browser";
import { startTask } from "./support/demo";
import { edgePerTest, type LocalObject } from "./support/edge";
import { openFollowing, recordTabPrints } from "./support/follow";

// Decision 0052: an object whose work only sleeps keeps no timer (its harness clock parks them, the alarm comes for
// the earliest), so workerd really evicts it 10 s after its last event (decision 0046) — no restart of workerd, no
// abort — and the alarm starts its next instance, which recovers (S4) and goes on at the sleeper's `until` (S3).
// Before, the scheduler's sleep timer and the lease's renewal timer held the instance in memory until the task woke.

const session = browserPerTest();
const edge = edgePerTest();

/** Longer than workerd's 10 s of inactivity, with room for a loaded machine. */
const EVERY_MS = 25_000;

/** A client API call over `POST /rpc` to the object `name`. */
async function rpc(edge: LocalObject, name: string, method: string, ...args: unknown[]): Promise<unknown> {
  const url = `${edge.socketUrl(name).replace(/^ws:/, "http:")}/rpc`;
  const response = await fetch(url, { method: "POST", body: JSON.stringify({ method, args }) });
  const body = (await response.json()) as { value?: unknown; error?: unknown };
  if (!response.ok) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
  return body.value;
}

/** Which instance printed `line` (`<instance>: <line>` in `edge.instances`). */
function printer(edge: LocalObject, line: string): string | undefined {
  return edge.instances.lines.find((entry) => entry.endsWith(`: ${line}`))?.split(": ")[0];
}

/** The instances that started, in order. */
function starts(edge: LocalObject): string[] {
  return edge.instances.lines.filter((entry) => entry.endsWith(": started")).map((entry) => entry.split(": ")[0]!);
}

const S12_END =
  "SELECT status, record ->> '$.memos' AS memos, record ->> '$.restarts' AS restarts FROM tasks WHERE kind = 'example.counter'";

describe("an object whose tasks sleep is evicted, and its alarm brings it back (Chromium + workerd, decision 0052)", () => {
  it("decision 0052, S3/S4/S12: an object counting a tick every 25 s is evicted while it sleeps; each tick comes from a new instance started by the alarm, each printed once", async () => {
    const name = "idle-plain";
    await rpc(edge, name, "createTask", "example.counter", { to: 3, everyMs: EVERY_MS });
    await expect.poll(() => edge.printed.lines.includes("tick 3"), { timeout: 3 * EVERY_MS + 60_000, interval: 500 }).toBe(true);
    expect(edge.printed.lines).toEqual(["tick 1", "tick 2", "tick 3"]);
    const [one, two, three] = ["tick 1", "tick 2", "tick 3"].map((line) => printer(edge, line));
    // Evicted while asleep, twice: the next tick is another instance's, one that started after the tick before it.
    expect(new Set([one, two, three]).size).toBe(3);
    const order = edge.instances.lines;
    expect(order.indexOf(`${two}: started`)).toBeGreaterThan(order.indexOf(`${one}: tick 1`));
    expect(order.indexOf(`${three}: started`)).toBeGreaterThan(order.indexOf(`${two}: tick 2`));
    expect(starts(edge)).toEqual([one, two, three]); // nothing else started it: no request came, the alarm did
    expect(await rpc(edge, name, "query", S12_END)).toEqual([{ status: "terminal", memos: null, restarts: null }]);
  }, 240_000);

  it("decision 0052, S3/S12: the object that took the lease when the tab left is evicted while the count sleeps; its alarm's instance takes the lease again and counts on, each tick once", async () => {
    const name = "follow-held-idle"; // a 10 minute lease: the object's renewal (every 200 s) is what held it before
    const tabPrints = await recordTabPrints(session);
    const page = await openFollowing(session, edge, name);
    await page.waitForSelector('body[data-runs="here"]', { state: "attached" });
    await startTask(page, "example.counter", { to: 3, everyMs: EVERY_MS });
    await expect.poll(() => tabPrints.includes("tick 1"), { timeout: 30_000 }).toBe(true);
    // The tab leaves (the object takes the lease at the release) and goes.
    await page.evaluate(() => pi.client.leave());
    const before = new Set(starts(edge));
    await page.close();
    await expect.poll(() => edge.printed.lines.includes("tick 3"), { timeout: 2 * EVERY_MS + 60_000, interval: 500 }).toBe(true);
    expect(tabPrints).toEqual(["tick 1"]);
    expect(edge.printed.lines).toEqual(["tick 2", "tick 3"]);
    const two = printer(edge, "tick 2")!;
    const three = printer(edge, "tick 3")!;
    // The instance that took the lease over was evicted while the task slept: tick 2 is a later instance's, and
    // tick 3 another's again (each took the lease anew, the copy's epochs show it below).
    expect(before.has(two)).toBe(false);
    expect(three).not.toBe(two);
    const order = edge.instances.lines;
    expect(order.indexOf(`${three}: started`)).toBeGreaterThan(order.indexOf(`${two}: tick 2`));
    expect(await rpc(edge, name, "query", S12_END)).toEqual([{ status: "terminal", memos: null, restarts: null }]);
    const [{ epochs }] = (await rpc(edge, name, "query", "SELECT count(*) AS epochs FROM pi_durable_epochs")) as [{ epochs: number }];
    // The tab's epoch, the takeover's, then one per instance the alarm started that wrote (tick 2's, tick 3's). Counted,
    // not read off the largest: the object's first epoch is drawn at random (decision 0074).
    expect(epochs).toBeGreaterThanOrEqual(4);
  }, 240_000);

  it("decision 0052, S3/S12: a held lease of 3 s lapses while the object idles in memory (no eviction yet): the instance ends at the alarm, the platform runs the alarm again on a new instance, which takes the lease anew and counts on, each tick once", async () => {
    const name = "short-held-idle"; // a 3 s lease: the count's 6 s sleeps outlive it, workerd's 10 s eviction does not come first
    const tabPrints = await recordTabPrints(session);
    const page = await openFollowing(session, edge, name);
    await page.waitForSelector('body[data-runs="here"]', { state: "attached" });
    await startTask(page, "example.counter", { to: 3, everyMs: 6_000 });
    await expect.poll(() => tabPrints.includes("tick 1"), { timeout: 30_000 }).toBe(true);
    await page.evaluate(() => pi.client.leave());
    const before = new Set(starts(edge));
    await page.close();
    await expect.poll(() => edge.printed.lines.includes("tick 3"), { timeout: 90_000, interval: 500 }).toBe(true);
    expect(tabPrints).toEqual(["tick 1"]);
    expect(edge.printed.lines).toEqual(["tick 2", "tick 3"]);
    const two = printer(edge, "tick 2")!;
    const three = printer(edge, "tick 3")!;
    expect(before.has(two)).toBe(false);
    expect(three).not.toBe(two);
    expect(await rpc(edge, name, "query", S12_END)).toEqual([{ status: "terminal", memos: null, restarts: null }]);
  }, 240_000);
});
