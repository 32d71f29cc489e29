/**
 * Decision 0147's review, M1: a commit listener that fails at every commit made an error report at every commit — the
 * host's window of recent reports (200) filled with them, so a page subscribing late lost the real `task_faulted`, and
 * an app's `onReport` that writes (logs its errors into the harness) made a commit per report, a report per commit,
 * for good. Now a listener's failure is reported once until it is heard without failing again.
 */
import { expect, it } from "vitest";
import { RecentReports } from "../src/host/recent-reports.ts";
import { createRegistry, Harness, MemoryStorage, type Report } from "../src/index.ts";
import { ctx, flush } from "./support.ts";

const noisy = () => {
  throw new Error("noisy listener");
};

it("S7 (0147's review, M1): a listener throwing at every one of 201 commits is reported once, and a page subscribing late still sees the real task_faulted", async () => {
  const recent = new RecentReports();
  const harness = await Harness.open(new MemoryStorage(), { registry: createRegistry(), onReport: recent.report }, ctx);
  recent.report({ kind: "task_faulted", taskId: 1, taskKind: "x", conversationId: 1, reason: "phase_failed", message: "the real one" });
  harness.onCommit(noisy);
  for (let i = 0; i < 201; i++) await harness.createConversation({}, ctx);
  const late: Report[] = [];
  recent.add((report) => void late.push(report));
  expect(late.filter((report) => report.kind === "error")).toHaveLength(1);
  expect(late.some((report) => report.kind === "task_faulted" && report.message === "the real one")).toBe(true);
  await harness.close(ctx);
});

it("S7 (0147's review, M1): an onReport that commits, with a listener throwing at every commit, makes one report and one commit — the loop ends", async () => {
  let harness!: Harness;
  let reports = 0;
  let commits = 0;
  harness = await Harness.open(
    new MemoryStorage(),
    {
      registry: createRegistry(),
      onReport: () => {
        reports++;
        if (reports < 1_000 && !harness.closed) void harness.createConversation({}, ctx).catch(() => {}); // a guard for the test run only
      },
    },
    ctx,
  );
  harness.onCommit(() => void commits++);
  harness.onCommit(noisy);
  await harness.createConversation({}, ctx);
  await flush(20);
  expect(reports).toBe(1);
  expect(commits).toBe(2); // the first, and the one its report wrote
  await harness.close(ctx);
});

it("S7 (0147's review, M1): a listener that fails, is heard well, then fails again is reported twice; a rejection counts as a failure and a resolution as well", async () => {
  const errors: unknown[] = [];
  const harness = await Harness.open(
    new MemoryStorage(),
    { registry: createRegistry(), onReport: (report) => void (report.kind === "error" && errors.push(report.error)) },
    ctx,
  );
  const plan = ["throw", "throw", "well", "reject", "reject", "resolve", "throw"];
  let at = 0;
  harness.onCommit(() => {
    const step = plan[at++];
    if (step === "throw") throw new Error(`t${at}`);
    if (step === "reject") return Promise.reject(new Error(`r${at}`)) as unknown as void;
    if (step === "resolve") return Promise.resolve() as unknown as void;
  });
  for (const _ of plan) {
    await harness.createConversation({}, ctx);
    await flush(1);
  }
  expect(errors.map((error) => (error as Error).message)).toEqual(["t1", "r4", "t7"]);
  await harness.close(ctx);
});
