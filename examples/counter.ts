/**
 * The seed's Example 12, runnable: `npm run example:counter` (cut by close()) or
 * `npm run example:counter -- --kill` (cut by a simulated kill: the database image is copied right after
 * `tick 2` is printed and the first harness is abandoned mid-phase, as a killed process would be), or
 * `npm run example:counter -- --edge` (on a local Cloudflare Durable Object that aborts itself after `tick 2`;
 * see counter-edge.ts).
 */

import { createRegistry, BACKGROUND_CONTEXT as ctx, defineExtension, Harness, type Storage } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { counterTask, SEED_QUERY } from "./counter-task.ts";

if (process.argv.includes("--edge")) {
  const { runCounterOnEdge } = await import("./counter-edge.ts");
  await runCounterOnEdge();
} else {
  await inProcess(process.argv.includes("--kill"));
}

async function inProcess(kill: boolean) {
  const storage = await openSqliteStorage({ vfs: "memory" });
  let cut: () => void;
  const cutDone = new Promise<void>((resolve) => (cut = resolve));
  let image: Uint8Array | undefined;
  let first: Harness | undefined;

  first = await Harness.open(
    storage,
    {
      registry: registry(async (line) => {
        console.log(line);
        if (line !== "tick 2") return;
        if (kill) {
          image = await storage.exportImage();
          cut();
          await new Promise(() => {}); // the process is gone: this phase never continues
        } else {
          void first!.close(ctx).then(cut);
        }
      }),
    },
    ctx,
  );
  const root = await first.root(ctx);
  const id = await root.commit(
    (tx) =>
      tx.createTask(
        counterTask(() => {}),
        { to: 5 },
      ),
    ctx,
  );
  first.resume();
  await cutDone;

  const reopenedStorage = kill ? await openSqliteStorage({ vfs: "memory", image }) : storage;
  await printTable(
    reopenedStorage,
    kill
      ? "-- killed right after tick 2; the database before the reopen:"
      : "-- closed right after tick 2; the database before the reopen:",
  );

  const second = await Harness.open(reopenedStorage, { registry: registry((line) => console.log(line)) }, ctx);
  await printTable(reopenedStorage, "-- after open (a kill counts a restart; a close does not):");
  const done = await second.waitForTask(id, ctx);
  if (done.state.status === "terminal" && done.state.outcome.status === "completed") console.log(done.state.outcome.result);
  await printTable(reopenedStorage, "-- at the end:");
  await second.close(ctx);
  await reopenedStorage.close();
}

function registry(print: (line: string) => void | Promise<void>) {
  return createRegistry().install(defineExtension({ name: "example", tasks: [counterTask(print)] }));
}

async function printTable(storage: Storage, heading: string) {
  console.log(`\n${heading}\n${SEED_QUERY}`);
  console.table(await storage.query(SEED_QUERY));
}
