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
start.addEventListener("click", async () => {
  // Start as often as you like, also after a reload: the key makes it one task.
  const id = await client.createTask("app.checklist", { steps: 3 }, { key: "welcome-checklist" });
  show("task", String(id));
  const done = await client.waitForTask(id);
  const outcome = done.state.status === "terminal" ? done.state.outcome : undefined;
  show("result", outcome?.status === "completed" ? String(outcome.result) : (outcome?.status ?? done.state.status));
});
