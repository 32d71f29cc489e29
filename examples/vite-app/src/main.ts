import { connectHarness } from "pi-durable-web/client";

const client = connectHarness(new Worker(new URL("./worker.ts", import.meta.url), { type: "module" }));
const show = (id: string, text: string) => {
  document.getElementById(id)!.textContent = text;
};
client.onStatus((status) => show("status", status.kind));
await client.ready();
// Ask the browser not to evict this origin's database under storage pressure, and show what it stores.
await client.persistStorage();
const storage = await client.storageEstimate();
show("storage", `${storage.usage ?? "?"} bytes stored${storage.persisted ? ", kept under storage pressure" : ""}`);

const start = document.getElementById("start") as HTMLButtonElement;
start.disabled = false;
// `?bug=effect-outside-memo` plants a bug for the crash sweep's own test (tests/sweep.spec.ts): only the
// checklist runs, its side effect outside a memo.
const memo = new URLSearchParams(location.search).get("bug") !== "effect-outside-memo";
start.addEventListener("click", async () => {
  // Start as often as you like, also after a reload: the keys make it the same tasks, the requestId one message.
  // One after the other: the agent's note (a tool call), a reminder that sleeps 300 ms, then the checklist.
  if (memo) {
    const conversation = await client.rootConversation({ model: "faux/faux-1" });
    const note = await client.submit(conversation, {
      type: "input",
      content: "Note that the checklist started.",
      requestId: "checklist-started",
    });
    await client.waitForSubmission(note);
    await client.waitForTask(await client.createTask("app.reminder", { afterMs: 300 }, { key: "checklist-reminder" }));
  }
  const id = await client.createTask("app.checklist", { steps: 3, ...(memo ? {} : { memo: false }) }, { key: "welcome-checklist" });
  show("task", String(id));
  const done = await client.waitForTask(id);
  const outcome = done.state.status === "terminal" ? done.state.outcome : undefined;
  show("result", outcome?.status === "completed" ? String(outcome.result) : (outcome?.status ?? done.state.status));
});
