/**
 * Decision 0123's review (L1, L2): what `HostClient` tells the page of the statuses a transport and the host report.
 * L1: a lower `reconnecting` is hidden only when it continues the wait shown — a wait to be served again (held) that goes
 * on, or that begins right after a drop's `reconnecting` at the same attempt (0123's item 3). A real drop during a wait is
 * told (before: the page kept the old wait's `reconnecting 3 / 2000 ms` while the connection was down, retrying in
 * 400 ms), and so is a new wait after a drop at a lower attempt. (L2, the same status never told twice, is in
 * follower-leader-status.test.ts.)
 */
import { describe, expect, it } from "vitest";
import { HostClient } from "../src/host/client.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";

/** A page whose transport reports what the test says (`HarnessClient` over a socket does this from its `onState`). */
class Page extends HostClient {
  report(status: HarnessStatus, hold = false) {
    this.transportStatus(status, hold);
  }
}
const silent: HostEndpoint = { call: () => new Promise(() => {}), subscribe: () => new Promise(() => {}), unsubscribe: () => {} };
const waiting = (attempt: number, retryInMs: number): HarnessStatus => ({ kind: "reconnecting", attempt, retryInMs });
const shown = (told: HarnessStatus[]) => told.map((s) => (s.kind === "reconnecting" ? `reconnecting ${s.attempt}/${s.retryInMs}` : s.kind));

describe("a lower reconnecting is hidden only when it continues the wait shown (0123's review, L1)", () => {
  it("L1: a drop during a subscription's wait at attempt 3 is told: reconnecting 1 with the drop's retry (before: hidden, the page kept 3 / 2000 ms)", () => {
    const page = new Page(silent);
    const told: HarnessStatus[] = [];
    page.onStatus((status) => told.push(status));
    page.report(waiting(1, 500), true);
    page.report(waiting(2, 1000), true);
    page.report(waiting(3, 2000), true);
    page.report(waiting(1, 400)); // the connection dropped
    page.report(waiting(2, 800));
    expect(shown(told)).toEqual([
      "starting",
      "reconnecting 1/500",
      "reconnecting 2/1000",
      "reconnecting 3/2000",
      "reconnecting 1/400",
      "reconnecting 2/800",
    ]);
  });

  it("L1: a new wait after a drop's reconnecting 5 is told at its own attempt (before: hidden until it passed 5, the page showing the dead connection's retry)", () => {
    const page = new Page(silent);
    const told: HarnessStatus[] = [];
    page.onStatus((status) => told.push(status));
    page.report(waiting(5, 8000));
    page.report(waiting(1, 500), true); // the connection opened; the status subscription waits
    expect(shown(told)).toEqual(["starting", "reconnecting 5/8000", "reconnecting 1/500"]);
  });

  it("0123 (3), kept: within one wait the attempt never goes down, and a drop's reconnecting 1 then the carried subscription's wait 1 is told once", () => {
    const page = new Page(silent);
    const told: HarnessStatus[] = [];
    page.onStatus((status) => told.push(status));
    page.report(waiting(1, 400));
    page.report(waiting(1, 500), true); // the same wait, from the page's side
    page.report(waiting(2, 1000), true);
    page.report(waiting(3, 2000), true);
    page.report(waiting(2, 1000), true); // the highest waiter served, a lower one failed again
    expect(shown(told)).toEqual(["starting", "reconnecting 1/400", "reconnecting 2/1000", "reconnecting 3/2000"]);
  });
});
