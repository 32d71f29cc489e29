import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { counterTask } from "../../examples/counter-task.ts";
import { systemClock } from "../../src/base/clock.ts";
import { Follower } from "../../src/follow/follower.ts";
import { answerForwarded, FORWARD } from "../../src/follow/forwarding.ts";
import { FollowLink } from "../../src/follow/link-client.ts";
import { Mirror, remoteArbiter } from "../../src/follow/mirror.ts";
import { createRegistry, BACKGROUND_CONTEXT as ctx, defineExtension, Harness, type Json } from "../../src/index.ts";
import { openSqliteStorage } from "../../src/storage/sqlite/open-storage.ts";
import { followSocket, until } from "./follow-support.ts";
import { type Edge, startEdge } from "./support.ts";

// Decision 0139 in workerd: a page connected to the object itself (`POST /rpc` as caller alice) presses Send while the
// object's instance that handed the lease back to a tab (runHere) still lives — its alarm held here so that the window
// stays open (on Cloudflare it ends the instance within milliseconds). Before: 400 `HarnessClosed` (its own harness is
// closed), final. Now: 503 `NotReady`; sent again under the same requestId once the next instance follows, the write
// is forwarded to the tab that holds the lease and made once.

describe("a page's Send in the object's switch after a take-back (decision 0139)", { timeout: 90_000 }, () => {
  let edge: Edge;
  beforeAll(async () => {
    edge = await startEdge();
  }, 120_000);
  afterAll(async () => {
    await edge?.dispose();
  });

  it("S8/S12: POST /rpc submit in the switch is 503 NotReady; the same requestId after the instance ends is forwarded to the tab and made once", async () => {
    // A 60 s lease: every move here is a release (a renewal delayed past 3 s under load would let the object take it).
    const name = "long-lease-page-switch";
    const mark = edge.printed.lines.length;
    const link = new FollowLink({ clock: systemClock, send: (frame) => socket.send(frame), resendMs: 500 });
    const socket = followSocket(edge, name, "alice", link);
    let leaving: Promise<unknown> | undefined;
    let mirror: Mirror | undefined;
    const counter = (printed: string[]) =>
      createRegistry().install(
        defineExtension({
          name: "example",
          tasks: [
            counterTask((line) => {
              printed.push(line);
              if (line === "tick 2" && mirror && !leaving) queueMicrotask(() => (leaving = mirror!.handOver(ctx)));
            }),
          ],
        }),
      );
    const storage = await openSqliteStorage({ vfs: "memory" });
    await until("the follow socket opens", () => socket.open);
    const lease = { place: "tab", arbiter: remoteArbiter(link) };
    const first = await Harness.open(storage, { registry: counter([]), lease }, ctx);
    mirror = new Mirror({ harness: first, link, clock: systemClock, resendMs: 500 });
    const root = await first.root(ctx);
    await root.commit(
      (tx) =>
        tx.createTask(
          counterTask(() => {}),
          { to: 30 },
        ),
      ctx,
    );
    first.resume();
    await until("the hand-over", () => leaving);
    await leaving;
    mirror.stop();
    // The tab follows the object, then takes the lease back (runHere) with the object's alarms held: its switch stays.
    const following = await Harness.open(storage, { registry: createRegistry(), lease }, ctx);
    const follower = new Follower({ harness: following, link, place: "tab" });
    await edge.printed.until((lines) => lines.slice(mark).includes("object: tick 4"), "the object's tick 4");
    await edge.json("follow", name, "/hold-alarms");
    await follower.takeBack(ctx);
    follower.stop();
    await following.close(ctx);
    let acknowledging: Mirror | undefined;
    const back = await Harness.open(
      storage,
      {
        registry: counter([]),
        lease: {
          ...lease,
          confirm: (position, context) => (acknowledging ? acknowledging.whenAcknowledged(position, context) : Promise.resolve()),
        },
      },
      ctx,
    );
    expect(back.readOnly).toBe(false);
    acknowledging = new Mirror({ harness: back, link, clock: systemClock, resendMs: 500 });
    // The tab makes the writes the object forwards to the holder (decision 0034; the worker's browser/follow.ts).
    link.serve(FORWARD, (method, args) => answerForwarded(back, { method, args }, ctx) as Promise<unknown> as Promise<Json>);
    const send = () =>
      edge.call("follow", name, "/rpc", {
        method: "POST",
        headers: { "x-caller": "alice", "content-type": "application/json" },
        body: JSON.stringify({ method: "submit", args: [root.id, { type: "write", entry: { kind: "app.note" }, requestId: "switch-1" }] }),
      });
    const refused = await send();
    const body = (await refused.json()) as { error?: { name: string } };
    // Before: 400 HarnessClosed ("Harness is closed. Open a new one on the same storage to continue.").
    expect({ status: refused.status, name: body.error?.name }).toEqual({ status: 503, name: "NotReady" });
    // The alarm would end the instance now; the next one follows the tab, and the page's resend is forwarded to it.
    await edge.call("follow", name, "/abort").catch(() => undefined);
    const made = await until("the resend is made", async () => {
      const answer = await send();
      return answer.ok ? ((await answer.json()) as { value: number }) : undefined;
    });
    const stored = await back.storage.findSubmission(root.id, "switch-1");
    expect(made.value).toBe(stored!.id);
    // Sent again once more, still one note: the tab made it once.
    const again = await send();
    expect(((await again.json()) as { value: number }).value).toBe(stored!.id);
    const notes = (await back.conversation(root.id).entries(ctx)).filter((entry) => entry.kind === "app.note");
    expect(notes).toHaveLength(1);
    acknowledging.stop();
    await back.close(ctx);
    socket.stop();
  }, 90_000);
});
