import { expect, test } from "pi-durable-web/playwright";

/** The checklist tasks a recovery names (Start also sends the agent a message; its tasks may be cut off too). */
const checklists = (recovery: { tasks: Array<{ kind: string }> }) => recovery.tasks.filter((task) => task.kind === "app.checklist");

// A reload is the crash: the worker is cut off right after step 2 is committed, and the next load carries on.
test("a reload right after step 2 is recovered: steps 3 onwards run once, the task is the same one", async ({ page, harness }) => {
  await page.goto("/");
  expect(await harness.ready()).toEqual({ stop: "none", tasks: [] });
  await expect(page.locator("#storage")).toHaveText(/^\d+ bytes stored/); // client.storageEstimate()

  const point = await harness.armCrashPoint("checklist:after-step-2");
  await page.getByRole("button", { name: "Start" }).click();
  const hit = await point.reached();
  await harness.crash("reload");

  const recovery = await harness.ready();
  expect(recovery.stop).toBe("crash");
  expect(checklists(recovery)).toEqual([{ id: hit.taskId, kind: "app.checklist", restarts: 1 }]);
  // Start again after the reload: the key makes it the same task, not a second one.
  await page.getByRole("button", { name: "Start" }).click();
  await expect(page.locator("#task")).toHaveText(String(hit.taskId));
  await expect(page.locator("#result")).toHaveText("3 steps done");
  const steps = await harness.query("SELECT record ->> '$.payload.n' AS n FROM entries WHERE kind = 'app.step' ORDER BY id");
  expect(steps.map((row) => row.n)).toEqual([1, 2, 3]);
  expect(await harness.query("SELECT count(*) AS tasks FROM tasks WHERE kind = 'app.checklist'")).toEqual([{ tasks: 1 }]);
});

for (const kind of ["terminate-worker", "renderer"] as const) {
  test(`crash("${kind}") mid-task: the next load recovers it with one restart`, async ({ page, harness }) => {
    await page.goto("/");
    await harness.ready();
    const point = await harness.armCrashPoint("checklist:after-step-1");
    await page.getByRole("button", { name: "Start" }).click();
    const hit = await point.reached();
    await harness.crash(kind);
    if (kind === "terminate-worker") await harness.page.reload(); // the page stays; its next load recovers
    const recovery = await harness.ready();
    expect(recovery.stop).toBe("crash");
    expect(checklists(recovery)).toEqual([{ id: hit.taskId, kind: "app.checklist", restarts: 1 }]);
    const done = await harness.waitForTask((task) => task.id === hit.taskId && task.state.status === "terminal");
    expect(done.state).toEqual({ status: "terminal", outcome: { status: "completed", result: "3 steps done" } });
  });
}

test.describe("in a persistent context (OPFS on disk)", () => {
  test.use({ persistentContext: true });
  test("the checklist survives a reload and completes once", async ({ page, harness }) => {
    await page.goto("/");
    await harness.ready();
    await page.getByRole("button", { name: "Start" }).click();
    await expect(page.locator("#result")).toHaveText("3 steps done");
    await harness.crash("reload");
    await harness.ready();
    // An idle crash is still a crash: nothing was running, but the harness was never closed.
    expect(await harness.recovered()).toMatchObject({ stop: "crash" });
    expect(checklists(await harness.recovered())).toEqual([]);
    await page.getByRole("button", { name: "Start" }).click();
    await expect(page.locator("#result")).toHaveText("3 steps done");
    expect(await harness.query("SELECT count(*) AS steps FROM entries WHERE kind = 'app.step'")).toEqual([{ steps: 3 }]);
  });
});
