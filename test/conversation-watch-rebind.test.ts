import { expect, it } from "vitest";
import type { ConversationViewUpdate } from "../src/agent/view/view.ts";
import { ConversationWatch } from "../src/host/conversation-watch.ts";
import { createRegistry, Harness, MemoryStorage } from "../src/index.ts";
import { ctx, flush } from "./support.ts";

// Decision 0133: a watch made while the host reopens may start on the harness the reopen then moves every view to.
// Moved to the harness it already watches, it goes on there: no second snapshot, each commit heard once.
it("S5: a ConversationWatch moved to the harness it watches goes on there: one snapshot, each commit once; moved to another harness, one snapshot there", async () => {
  const first = await Harness.open(new MemoryStorage(), { registry: createRegistry() }, ctx);
  const root = await first.root(ctx);
  const heard: ConversationViewUpdate["type"][] = [];
  const watch = new ConversationWatch({
    conversationId: root.id,
    send: (update) => void heard.push(update.type),
    follows: () => false,
    lost: () => {},
  });
  expect(watch.start(first)).toBeUndefined();
  await flush(2);
  watch.rebind(first); // before: stopped and watched again, a second snapshot
  await root.commit((tx) => void tx.appendEntry({ kind: "app.note", payload: 1 }), ctx);
  await flush(2);
  expect(heard).toEqual(["snapshot", "commit"]);
  const second = await Harness.open(new MemoryStorage(), { registry: createRegistry() }, ctx);
  await second.root(ctx);
  watch.rebind(second);
  await flush(2);
  expect(heard).toEqual(["snapshot", "commit", "snapshot"]);
  watch.end();
  await first.close(ctx);
  await second.close(ctx);
});
