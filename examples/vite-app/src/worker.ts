// The worker owns the database: it takes the lock, opens SQLite on OPFS, recovers what a reload cut off and
// runs the tasks. serveHarness must be its first statement.
import { serveHarness } from "pi-durable-web/worker";
import { agentTools, offlineModels } from "./agent";
import { app } from "./checklist";

serveHarness({ extensions: [app, agentTools], models: offlineModels() });
