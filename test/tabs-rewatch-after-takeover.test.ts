/**
 * Decision 0140's reading of the browser's path: the shipped React hooks do not watch again by themselves
 * (`useConversationView` throws a `lost` into the error boundary; `DurableChatTransport` ends the reply it streams with
 * an error and opens anew only at the next request) — but in a browser page every subscription goes through the tabs'
 * endpoint (`HarnessClient` on a worker: `tabsEndpoint(wrapHost(worker))`), which moves it with the database and takes
 * the host's `HarnessClosed` for no refusal. So a watch its worker ended at a takeover (0134's review did so during a
 * switch) is asked again when the database is open again, and React never hears `lost`. Pinned here; it passes on the
 * code before 0140 too (coverage of what the decision relies on for the browser).
 */
import { expect, it } from "vitest";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { HarnessClosed } from "../src/errors.ts";
import type { HostEndpoint, SubscriptionLost } from "../src/host/endpoint.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";

const flush = async () => {
  for (let i = 0; i < 20; i++) await Promise.resolve();
};

it("S5: a watch its worker ends with HarnessClosed at a takeover is asked again on the worker once it is ready again; the page is never told lost and hears the new snapshot", async () => {
  let tellStatus: (status: HarnessStatus) => void = () => {};
  const watches: Array<{ emit: (value: unknown) => void; lost: SubscriptionLost | undefined }> = [];
  const own: HostEndpoint = {
    call: async () => null,
    subscribe: async (method, _args, emit, lost) => {
      if (method === "onStatus") {
        tellStatus = emit as (status: HarnessStatus) => void;
        emit({ kind: "ready", database: "db" } as HarnessStatus);
      } else watches.push({ emit, lost });
      return watches.length + 1;
    },
    unsubscribe: () => {},
  };
  const tabs = tabsEndpoint(own);
  await tabs.subscribe("onStatus", [], () => {});
  await flush();
  const heard: unknown[] = [];
  const lost: Error[] = [];
  await tabs.subscribe(
    "watchConversation",
    [1],
    (value) => heard.push(value),
    (error) => void lost.push(error),
  );
  watches[0]!.emit("snapshot 1");
  // The takeover: the worker's host ends the view, says closed, queues for the database, opens it again.
  watches[0]!.lost?.(new HarnessClosed());
  tellStatus({ kind: "closed", reason: "takeover" });
  tellStatus({ kind: "waiting-for-lock", database: "db" });
  await flush();
  expect(watches).toHaveLength(1);
  tellStatus({ kind: "ready", database: "db" } as HarnessStatus);
  await flush();
  expect(watches).toHaveLength(2); // asked again
  watches[1]!.emit("snapshot 2");
  expect(heard).toEqual(["snapshot 1", "snapshot 2"]);
  expect(lost).toEqual([]);
  tabs.close();
});
