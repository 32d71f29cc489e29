import * as Comlink from "comlink";
import type { E2eWindow, WorkerApi } from "./api.ts";
import "./host-page.ts";

// The e2e page: one module worker that owns the database, reachable as window.e2e.

function startWorker(): Worker {
  return new Worker(new URL("./worker.ts", import.meta.url), { type: "module", name: "db" });
}

let worker = startWorker();
const e2e: E2eWindow["e2e"] = {
  api: Comlink.wrap<WorkerApi>(worker),
  restartWorker() {
    worker.terminate();
    worker = startWorker();
    e2e.api = Comlink.wrap<WorkerApi>(worker);
  },
};
window.e2e = e2e;
document.body.dataset.ready = "true";
