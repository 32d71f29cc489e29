/// <reference lib="webworker" />
// The demo app's worker: it owns the OPFS database and runs the harness; the page talks to it with
// `connectHarness` (pi-durable-web/client).
import { serveHarness } from "../src/browser/worker.ts";
import { demoExtension } from "./demo-tasks.ts";

// The page passes `{ settings, paused }` as the worker's name: both must be known before the database opens.
const { settings, paused } = JSON.parse(self.name || "{}") as { settings?: object; paused?: boolean };

serveHarness({ extensions: [demoExtension], settings, autoResume: !paused });
