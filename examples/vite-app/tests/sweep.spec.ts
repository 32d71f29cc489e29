import type { Page } from "@playwright/test";
import { browserCrashSweep, crashEveryCommit, expect, test } from "pi-durable-web/playwright";

// The user's scenario: press Start. The page then sends a message the agent answers with a tool call, starts a
// reminder that sleeps 300 ms, and runs the checklist; each step, the reminder and each tool call have a side
// effect (a console line "effect: …"), which must happen at most once however the tab is crashed.
const start = (page: Page) => page.getByRole("button", { name: "Start" }).click();

// A reload at every commit of the scenario, both sides of each (a sample, to keep the run short), in two
// parallel shards; a world checks the built-in invariants and this one of the app's own.
crashEveryCommit(
  "the app survives a reload at every commit of Start: a tool call and a sleeping task",
  {
    run: start,
    resume: start, // after the reload the user presses Start again: the key and the requestId make it the same work
    invariants: [
      async ({ query }) => {
        const steps = await query("SELECT record ->> '$.payload.n' AS n FROM entries WHERE kind = 'app.step' ORDER BY id");
        const ns = steps.map((row) => row.n).join(",");
        return ns === "1,2,3" ? undefined : `the checklist's steps are ${ns}, not 1,2,3`;
      },
    ],
  },
  { crash: "reload", shards: 2, sample: { count: 16, seed: 7 } },
);

test("the sweep catches a side effect outside a memo (a planted bug) and names the commit", async ({ browser, baseURL }) => {
  test.setTimeout(300_000);
  const found = await browserCrashSweep(
    browser,
    { name: "planted bug", url: "/?bug=effect-outside-memo", run: start, resume: start },
    { crash: "reload", edges: "before", ...(baseURL ? { context: { baseURL } } : {}) },
  ).catch((error: unknown) => error);
  expect(found).toMatchObject({ name: "CrashSweepViolation", invariant: "effects-at-most-once" });
  expect((found as Error).message).toMatch(/crashing right before commit \d+ breaks effects-at-most-once: .*checklist step \d ×2/);
});
