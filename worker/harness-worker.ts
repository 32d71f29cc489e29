/// <reference lib="webworker" />
// The demo app's worker: it owns the OPFS database and runs the harness; the page talks to it with
// `connectHarness` (pi-durable-web/client).
import { serveHarness } from "../src/browser/worker.ts";
import { demoExtension } from "./demo-tasks.ts";

// The page passes `{ settings, paused, tab }` as the worker's name: they must be known before the database
// opens (`tab` marks this worker's printed lines; see demo-tasks.ts).
const { settings, paused } = JSON.parse(self.name || "{}") as { settings?: object; paused?: boolean };

serveHarness({ extensions: [demoExtension], settings, autoResume: !paused });
