import type { Page, Worker } from "playwright-core";
import { describe, expect, it } from "vitest";
import { browserPerTest } from "./support/browser";
import { startTask, ticks } from "./support/demo";
import { edgePerTest } from "./support/edge";
import { heardBy, holderOf, openFollowing, recordTabPrints, rpcOf, tickOf } from "./support/follow";

// Decision 0113's two seams that had no Chromium test, against workerd, with the page left open after its `pagehide`
// (dispatched, `persisted: true`, as for the back/forward cache: decision 0107 §5) and the counter's print declared
// (`runtime.beforeEffect`: under a followed lease it waits for the object's acknowledgement of the tick's memo):
//
// - A worker busy when its page leaves: it hears the page's word (and `leave`) only after the object took the lease.
//   The word, heard late, fences it at once: its `leave` finds no lease to release, and the object's run is the only
//   one — every tick printed once across the two places.
// - A worker whose link stays up (no close, no error) but whose frames are lost from the `pagehide` on: its `leave`
//   (the release) never arrives, nor its pushes or renewals. The page's word, on the page's own socket, shortens the
//   lease to the object's grace; the object takes it over when that expires (no release came) and counts on from what
//   it holds; the tab, which still hears the object, stops and follows read-only.
//
// In both, the tab's forks are what it stored that the object never got (decision 0133; before, only logged): its
// commits under its own epoch at or past where the object's epoch begins — one fork holding exactly those positions
// when there are any (a step's start stored at the hand-over, a memo whose push was lost), none when there are none
// (these runs mostly: decision 0113's later note — with the declared print only the releases were lost).

const session = browserPerTest();
const edge = edgePerTest();
/** Where the counter ends: far enough that the tab, fenced, never gets there. */
const TO = 40;

declare global {
  var __piDurableCommits: { log(): Array<{ fence?: { epoch: number; position: number } }> } | undefined;
  var e2eBusy: Promise<void> | undefined;
  var e2eSilent: { readonly dropped: number; restore(): void } | undefined;
}

/** The page's harness worker (the demo has one). */
function harnessWorker(page: Page): Worker {
  const workers = page.workers();
  expect(workers.length, "the demo's harness worker").toBeGreaterThan(0);
  return workers[0]!;
}

/** The page's `pagehide`, the page left open: its socket says `lease.leaving`, it posts its worker the word and `leave`. */
function pageHideIn(page: Page): Promise<void> {
  return page.evaluate(() => void globalThis.dispatchEvent(new PageTransitionEvent("pagehide", { persisted: true })));
}

/** A client API call of the object `name` over `POST /rpc`. */
const rpc = (name: string, method: string, ...args: unknown[]) => rpcOf(edge, name, method, ...args);

/** The lease epoch the tab writes under while it runs here. */
async function epochOf(page: Page): Promise<number> {
  const epoch = await page.evaluate(() => (pi.client.status as { epoch?: number }).epoch);
  expect(epoch, "the tab's epoch").toBeGreaterThan(0);
  return epoch!;
}

/**
 * The tab's forks are the work the object never got: the positions the tab stored under its epoch (its worker's commit
 * watch) at or past the start of the object's epoch after it (the object's own log). One fork of exactly those when
 * there are any, none otherwise. Returns what it compared, for the log.
 */
async function forksAreTheUnreceived(page: Page, name: string, tabEpoch: number, seen: () => string): Promise<string> {
  const commits = await harnessWorker(page).evaluate(() => globalThis.__piDurableCommits?.log() ?? []);
  const stored = commits.flatMap((commit) => (commit.fence?.epoch === tabEpoch ? [commit.fence.position] : []));
  expect(stored.length, `the tab's commits under epoch ${tabEpoch}`).toBeGreaterThan(0);
  const epochs = (await rpc(name, "query", "SELECT epoch, start FROM pi_durable_epochs ORDER BY epoch")) as Array<{
    epoch: number;
    start: number;
  }>;
  const taken = epochs.find((stretch) => stretch.epoch > tabEpoch);
  expect(taken, `the object's epoch after ${tabEpoch}: ${JSON.stringify(epochs)}`).toBeDefined();
  const unreceived = stored.filter((position) => position >= taken!.start).sort((a, b) => a - b);
  const forks = () => page.evaluate(() => pi.client.forks());
  const detail = () => `${seen()} stored ${JSON.stringify(stored)} object's epochs ${JSON.stringify(epochs)}`;
  await expect.poll(async () => (await forks()).length, { timeout: 30_000, message: detail() }).toBe(unreceived.length > 0 ? 1 : 0);
  const [fork] = await forks();
  if (fork) {
    expect(fork.mine.epoch, detail()).toBe(tabEpoch);
    expect(fork.from, detail()).toBe(unreceived[0]);
    expect(
      fork.transactions.map((transaction) => transaction.position),
      detail(),
    ).toEqual(unreceived);
  }
  return `${unreceived.length} (the tab stored ${stored[0]}-${stored.at(-1)} under epoch ${tabEpoch}, the object's epoch ${taken!.epoch} begins at ${taken!.start})`;
}

/**
 * What S12 promises across the two places: no tick printed twice, the object counting to the end, and a tick printed by
 * neither only where its memo `printed-n` was committed by the tab and acknowledged by the object (it is in the first
 * version of the counter the object logged under its own epoch: what it took over with). The memo is stored before the print: a tab cut between the memo's
 * acknowledgement and its print loses that print, at most once (1 run in 6 of the busy case: the tab printed 1-3,
 * the object 5-40). Before, the test asked for every tick printed exactly once, which the contract does not promise.
 */
async function countedOnceAcross(name: string, tabEpoch: number, tabPrints: string[], seen: () => string): Promise<void> {
  await edge.printed.until((lines) => lines.includes(`tick ${TO}`), "the object's last tick");
  const lastInTab = tickOf(tabPrints.at(-1)!);
  expect(lastInTab, seen()).toBeLessThan(TO);
  const printed = [...tabPrints, ...edge.printed.lines];
  expect(new Set(printed).size, `no tick printed twice: ${seen()}`).toBe(printed.length);
  const all = ticks(1, TO);
  expect(
    printed.every((line) => all.includes(line)),
    seen(),
  ).toBe(true);
  const unprinted = all.filter((line) => !printed.includes(line));
  expect(unprinted.length, `a print lost at most once: ${seen()}`).toBeLessThanOrEqual(1);
  // The object's first version of the counter (its takeover's, before it ran a step) holds every memo it received
  // from the tab: the tab's last print's (the declared print waited for its acknowledgement: the query's control), and
  // the one of a tick printed by neither.
  const [first] = (await rpc(
    name,
    "query",
    `SELECT l.position AS position, t.value ->> '$.memos' AS memos FROM pi_durable_log AS l, json_each(l.batch, '$.tasks') AS t
     WHERE l.epoch > ? AND t.value ->> '$.kind' = 'example.counter' ORDER BY l.position LIMIT 1`,
    tabEpoch,
  )) as Array<{ position: number; memos: string | null }>;
  // And it is the object's recovery of the tab's counter, before any step of its own (review of 0133's review, L4):
  // its first commit after the fence it took the lease with. The object's log holds nothing at the tab's epoch (it
  // begins at that fence), so what it received from the tab is read here, not under `epoch <= tabEpoch`.
  const [fence] = (await rpc(name, "query", "SELECT min(position) AS position FROM pi_durable_log WHERE epoch > ?", tabEpoch)) as Array<{
    position: number;
  }>;
  expect(first?.position, `the object's first counter is its first commit after its fence ${fence?.position}: ${seen()}`).toBe(
    fence!.position + 1,
  );
  const memos = JSON.parse(first?.memos ?? "{}") as Record<string, unknown>;
  const memoHeld = (n: number) => Object.hasOwn(memos, `printed-${n}`);
  expect(memoHeld(lastInTab), `the tab's last tick's memo in the object's first counter: ${JSON.stringify(first)} ${seen()}`).toBe(true);
  for (const line of unprinted) {
    expect(tickOf(line), `${line}, printed by neither, is the one the tab was cut at: ${seen()}`).toBe(lastInTab + 1);
    expect(
      memoHeld(tickOf(line)),
      `${line}, printed by neither: its memo in the object's first counter ${JSON.stringify(first)}: ${seen()}`,
    ).toBe(true);
  }
}

describe("the page's leaving word heard late, and a release that never arrives (Chromium + workerd, decision 0113)", () => {
  it("S4, S8, S12: a worker busy from before pagehide until the object took the lease hears the word late: fenced at once, its leave releases nothing, every tick printed once across the tab and the object, the tab follows read-only", async () => {
    const name = "follow-late-busy"; // a 10-minute lease: only the page's word can hand it over in time
    const tabPrints = await recordTabPrints(session);
    const page = await openFollowing(session, edge, name);
    await page.waitForSelector('body[data-runs="here"]', { state: "attached", timeout: 30_000 });
    await startTask(page, "example.counter", { to: TO, everyMs: 300, declared: true });
    await expect.poll(() => tabPrints.length, { timeout: 60_000, message: "the tab counts" }).toBeGreaterThanOrEqual(3);
    expect(await holderOf(edge.followUrl(name))).toMatchObject({ object: false });
    const tabEpoch = await epochOf(page);

    // The page waits to hear that its worker is busy, then leaves.
    await page.evaluate(() => {
      const channel = new BroadcastChannel("e2e-busy");
      globalThis.e2eBusy = new Promise((resolve) => {
        channel.onmessage = () => {
          globalThis.dispatchEvent(new PageTransitionEvent("pagehide", { persisted: true }));
          channel.close();
          resolve();
        };
      });
    });
    // The worker turns busy in one task that ends only once the object holds the lease (asked synchronously of the
    // object's own record): whatever its page posts meanwhile (the word, `leave`) waits behind it.
    const lease = edge
      .followUrl(name)
      .replace(/^ws/, "http")
      .replace(/\/follow$/, "/lease");
    await harnessWorker(page).evaluate((lease) => {
      setTimeout(() => {
        new BroadcastChannel("e2e-busy").postMessage("busy");
        for (;;) {
          const request = new XMLHttpRequest();
          request.open("GET", lease, false);
          request.send();
          if (request.status === 200 && (JSON.parse(request.responseText) as { holder?: string }).holder === "object") break;
        }
      });
    }, lease);
    await page.evaluate(() => globalThis.e2eBusy);
    const printedAtWord = tabPrints.length;

    // The object took the lease while the worker was busy, and counts on from what it holds.
    await expect
      .poll(() => heardBy(edge, name), { timeout: 30_000, message: "the object heard the page's word" })
      .toMatchObject({ leaving: 1 });
    await edge.printed.until((lines) => lines.length >= 1, "the object's first tick");
    const seen = () => JSON.stringify({ tab: tabPrints, object: edge.printed.lines });
    // The worker, free again, heard the word a grace late: fenced at once, it reopens read-only and follows.
    await page.waitForSelector('body[data-runs="elsewhere"]', { state: "attached", timeout: 60_000 });
    await countedOnceAcross(name, tabEpoch, tabPrints, seen);
    // Its `leave` came after the word and found no lease: no release under the superseded epoch ever went out.
    expect(await heardBy(edge, name), seen()).toEqual({ release: 0, leaving: 1 });
    expect(await holderOf(edge.followUrl(name)), seen()).toMatchObject({ object: true });
    const forks = await forksAreTheUnreceived(page, name, tabEpoch, seen);
    console.log(
      `late word (busy worker): the tab printed ticks 1-${tickOf(tabPrints.at(-1)!)} (${tabPrints.length - printedAtWord} after the page's word), the object ${edge.printed.lines[0]}-${TO}; forks ${forks}`,
    );
  }, 300_000);

  it("S4, S8, S12: a worker whose link stays up but loses every frame it sends from pagehide on (its release never arrives): the object takes over when the lease the page's word shortened expires, the tab stops and follows read-only, every tick printed once", async () => {
    const name = "follow-late-silent";
    const tabPrints = await recordTabPrints(session);
    const page = await openFollowing(session, edge, name);
    await page.waitForSelector('body[data-runs="here"]', { state: "attached", timeout: 30_000 });
    await startTask(page, "example.counter", { to: TO, everyMs: 300, declared: true });
    await expect.poll(() => tabPrints.length, { timeout: 60_000, message: "the tab counts" }).toBeGreaterThanOrEqual(3);
    expect(await holderOf(edge.followUrl(name))).toMatchObject({ object: false });
    const tabEpoch = await epochOf(page);

    // The worker's link stays open but every frame it sends is lost: pushes, renewals, the release.
    await harnessWorker(page).evaluate(() => {
      const send = WebSocket.prototype.send;
      let dropped = 0;
      WebSocket.prototype.send = () => {
        dropped++;
      };
      globalThis.e2eSilent = {
        get dropped() {
          return dropped;
        },
        restore() {
          WebSocket.prototype.send = send;
        },
      };
    });
    await pageHideIn(page);
    await expect
      .poll(() => heardBy(edge, name), { timeout: 30_000, message: "the object heard the page's word" })
      .toMatchObject({ leaving: 1 });
    // The object takes the lease at its expiry (the grace after the word) and counts on.
    await edge.printed.until((lines) => lines.length >= 1, "the object's first tick");
    const seen = () => JSON.stringify({ tab: tabPrints, object: edge.printed.lines });
    // The tab stopped and follows read-only (its own fence ended with the grace; the object's word of its new holder
    // reaches it too: its link still delivers to it).
    await page.waitForSelector('body[data-runs="elsewhere"]', { state: "attached", timeout: 60_000 });
    const dropped = await harnessWorker(page).evaluate(() => globalThis.e2eSilent?.dropped ?? 0);
    expect(dropped, seen()).toBeGreaterThan(0);
    expect(await heardBy(edge, name), seen()).toEqual({ release: 0, leaving: 1 });

    // Its link delivering again, the tab follows the object to the end.
    await harnessWorker(page).evaluate(() => globalThis.e2eSilent?.restore());
    await countedOnceAcross(name, tabEpoch, tabPrints, seen);
    expect(await holderOf(edge.followUrl(name)), seen()).toMatchObject({ object: true });
    await page.waitForSelector('body[data-status="ready"][data-runs="elsewhere"]', { state: "attached", timeout: 60_000 });
    const forks = await forksAreTheUnreceived(page, name, tabEpoch, seen);
    console.log(
      `silent link: the tab printed ticks 1-${tickOf(tabPrints.at(-1)!)}, the object ${edge.printed.lines[0]}-${TO}; ${dropped} frames dropped; forks ${forks}; heard ${JSON.stringify(await heardBy(edge, name))}`,
    );
  }, 300_000);
});
