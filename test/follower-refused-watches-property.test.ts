/**
 * Decision 0144 at the boundary, by fast-check: a page refused its own worker's status, following the leading tab, asks
 * every kind of subscription (`onReport`, `watchTasks`, `watchConversation` — of its conversation or of one that does
 * not exist — and `watchPageCalls`) under app hooks that allow, refuse, throw or answer later, differently for this page
 * (`{ from: "page" }`) and for tabs (`{ from: "tab" }`). For every hook and kind: it is let by only if its own door lets
 * it by for this page (and then the leader's door decides it as a tab's); the own door is asked before the leader's; a
 * refusal at either is a typed error, and nothing is left subscribed at either worker. On the real wiring
 * (refused-page-world.ts).
 */
import fc from "fast-check";
import { expect, it } from "vitest";
import type { HostClient } from "../src/host/client.ts";
import { type Hook, refusedPageWorld } from "./refused-page-world.ts";
import { macrotask, tabsTestScope, until } from "./tabs-support.ts";

const scope = tabsTestScope();

const KINDS = ["onReport", "watchTasks", "watchConversation", "watchMissing", "watchPageCalls"] as const;
type Kind = (typeof KINDS)[number];
const DECISIONS = ["allow", "refuse", "throw", "later-allow", "later-refuse"] as const;
type Decision = (typeof DECISIONS)[number];

const methodOf = (kind: Kind) => (kind === "watchMissing" ? "watchConversation" : kind);
const allows = (decision: Decision) => decision === "allow" || decision === "later-allow";
const errorOf = (decision: Decision) => (decision === "throw" ? "AuthorizeFailed" : "NotAuthorized");

/** An app hook from a table (method → decision, by caller); `asked` records `from method` in the order asked. */
function hookOf(table: Record<"page" | "tab", Record<string, Decision>>, asked: string[]): Hook {
  return (caller, call) => {
    asked.push(`${caller.from} ${call.method}`);
    const decision = table[caller.from][call.method] ?? "allow";
    if (decision === "throw") throw new Error("the auth server is down");
    if (decision.startsWith("later-")) return new Promise((resolve) => setTimeout(() => resolve(decision === "later-allow"), 0));
    return decision === "allow";
  };
}

function subscribe(client: HostClient, kind: Kind, conversationId: number): Promise<() => void> {
  if (kind === "onReport") return client.onReport(() => {});
  if (kind === "watchTasks") return client.watchTasks(() => {});
  if (kind === "watchPageCalls") return client.watchPageCalls(conversationId, { pageId: client.pageId, tools: ["ask"] }, () => {});
  return client.watchConversationUpdates(kind === "watchMissing" ? conversationId + 1000 : conversationId, () => {});
}

const settled = async (promise: Promise<() => void>) => {
  const seen: { value?: () => void; error?: Error } = {};
  promise.then(
    (value) => (seen.value = value),
    (error: Error) => (seen.error = error),
  );
  await until(() => "value" in seen || "error" in seen, "the subscription answered");
  return seen;
};

const decisions = fc.record(
  Object.fromEntries(KINDS.map((kind) => [kind, fc.constantFrom(...DECISIONS)])) as Record<Kind, fc.Arbitrary<Decision>>,
);

it("0144 (property, the page's door): for every hook and subscription kind, a refused page that follows the leader is let by only what its own door lets by for this page, asked there first; a refusal is typed and leaves nothing subscribed at either worker", async () => {
  await fc.assert(
    fc.asyncProperty(
      decisions,
      decisions,
      fc.boolean(),
      fc.shuffledSubarray([...KINDS], { minLength: KINDS.length, maxLength: KINDS.length }),
      async (page, tab, tabSeesStatus, order) => {
        const asked: string[] = [];
        // `watchMissing` is a watchConversation: the hook sees one method; the table's `watchConversation` row decides.
        const table = {
          page: { ...page, onStatus: "refuse", createConversation: "allow" } as Record<string, Decision>,
          tab: { ...tab, onStatus: tabSeesStatus ? "allow" : "refuse", createConversation: "allow" } as Record<string, Decision>,
        };
        const hook = hookOf(table, asked);
        const { leader, own, client } = await refusedPageWorld(scope, `property-${crypto.randomUUID()}`, hook, hook);
        await until(() => client.status.kind === "failed", "the page's status refused");
        const conversationId = await client.createConversation(); // the sign-in: the page follows the leader
        try {
          for (const kind of order) {
            const method = methodOf(kind);
            const pageSays = table.page[method]!;
            const tabSays = table.tab[method]!;
            const counts = [leader.listenerCount(), own.listenerCount()];
            const from = asked.length;
            const seen = await settled(subscribe(client, kind, conversationId));
            for (let i = 0; i < 3; i++) await macrotask();
            const here = asked.slice(from);
            const atPage = here.indexOf(`page ${method}`);
            const atTab = here.indexOf(`tab ${method}`);
            expect(atPage, `${kind}: the own door asked`).toBeGreaterThanOrEqual(0);
            if (!allows(pageSays)) {
              expect(seen.error?.name, kind).toBe(errorOf(pageSays));
              expect(atTab, `${kind}: never carried`).toBe(-1);
            } else {
              expect(atTab, `${kind}: carried after the own door`).toBeGreaterThan(atPage);
              const expected = !allows(tabSays) ? errorOf(tabSays) : kind === "watchMissing" ? "NotFound" : undefined;
              expect(seen.error?.name, kind).toBe(expected);
            }
            if (seen.value) seen.value(); // unsubscribed: released at the leader, and the own door's hold let go too
            await until(() => leader.listenerCount() === counts[0] && own.listenerCount() === counts[1], `${kind}: nothing held`);
          }
        } finally {
          for (const cleanup of scope.cleanups.splice(0).reverse()) await cleanup();
        }
      },
    ),
    { numRuns: 30 },
  );
});
