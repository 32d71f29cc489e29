import { connectHarness, type HarnessStatus } from "../src/browser/client.ts";

// Settings travel in the worker's name: they must be known before the database opens. `?paused` opens the
// database without starting work, to look at what a crash left behind first.
const settings = JSON.parse(localStorage.getItem("pi-durable-web:settings") ?? "{}");
const paused = new URLSearchParams(location.search).has("paused");
const worker = new Worker(new URL("../worker/harness-worker.ts", import.meta.url), { type: "module", name: JSON.stringify({ settings, paused }) });
const client = connectHarness(worker);

const TRANSCRIPT = "pi-durable-web:transcript";
const transcript = (): string[] => JSON.parse(localStorage.getItem(TRANSCRIPT) ?? "[]");
new BroadcastChannel("pi-durable-web:print").onmessage = (event) => {
  const lines = [...transcript(), String(event.data.line)];
  localStorage.setItem(TRANSCRIPT, JSON.stringify(lines));
  render();
};

const statusElement = document.querySelector<HTMLElement>("#status")!;
const transcriptElement = document.querySelector<HTMLElement>("#transcript")!;
const reportsElement = document.querySelector<HTMLElement>("#reports")!;

function render() {
  transcriptElement.textContent = transcript().join("\n");
}

client.onStatus((status: HarnessStatus) => {
  document.body.dataset.status = status.kind;
  statusElement.textContent = status.kind === "failed" ? `failed: ${status.error.name}: ${status.error.message}` : status.kind;
});
void client.onReport((report) => {
  const item = document.createElement("li");
  item.textContent = JSON.stringify(report);
  reportsElement.append(item);
});

document.querySelector("#counter")!.addEventListener("click", () => void client.createTask("example.counter", { to: 5 }));
document.querySelector("#clear")!.addEventListener("click", () => {
  localStorage.removeItem(TRANSCRIPT);
  render();
});

render();
// Test and console hooks: the e2e tests drive the same page a person uses.
Object.assign(globalThis, { pi: { client, transcript } });
document.body.dataset.ready = "";
