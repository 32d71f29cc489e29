import { describe, expect, it } from "vitest";
import { createRegistry, DatabaseCorrupt, defineExtension, defineTask } from "../src/index.ts";
import { STORED_DEPTH_LIMIT } from "../src/limits.ts";
import { parseInto } from "../src/storage/rows.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import type { DamagedRow } from "../src/storage/storage.ts";
import { ctx, openHarness, runUntil } from "./support.ts";

/**
 * Decision 0082 (issue 25 item 4): what any check of the live rows in SQL before the open's recount (decision 0065's
 * plan) must match, pinned on the load that parses every row: `json_valid`'s depth boundary is the load's own, and a
 * damaged row at the largest id — the last one a read reaches, the bench's hot task's place — refuses a writable
 * open before the recount is written. The duplicated-key case is the one a check made of SQLite's JSON functions
 * misses (they read the first of two keys, `JSON.parse` the last): decision 0082's deferral failed it.
 */

const stall = defineTask<null, { phase: "stall" }, null>({
  name: "test.stall",
  version: 1,
  initial: () => ({ phase: "stall" }),
  phases: {
    stall: async (_task, runtime) => {
      await runtime.untilAborted();
      throw new Error("stopped");
    },
  },
  abort: async () => {},
});
const YEAR_MS = 365 * 24 * 3600 * 1000;
const idle = defineTask<null, { phase: "sleep" }, null>({
  name: "test.idle",
  version: 1,
  initial: () => ({ phase: "sleep" }),
  phases: { sleep: (_task, runtime, context) => runtime.sleepUntil(runtime.now() + YEAR_MS, { phase: "sleep" }, context) },
  abort: async () => {},
});
const registry = () => createRegistry().install(defineExtension({ name: "test", tasks: [stall, idle] }));
// The seed's query, over rows one of which is damaged (it would stop the statement).
const SEED_QUERY = "SELECT id, status, CASE WHEN json_valid(record) THEN record ->> '$.restarts' END AS restarts FROM tasks ORDER BY id";

/** A record text `levels` deep: an object (the record, with a state) holding arrays nested to the rest. */
function nestedRecord(levels: number): string {
  return `{"state":{},"x":${"[".repeat(levels - 1)}${"]".repeat(levels - 1)}}`;
}

/** Image of a crash with `running` stall tasks holding their invocations and `sleeping` idle ones asleep for a year. */
async function crashed(running: number, sleeping: number): Promise<Uint8Array> {
  const storage = await openSqliteStorage({ vfs: "memory" });
  const { harness, clock } = await openHarness(storage, { registry: registry() });
  const root = await harness.root(ctx);
  await root.commit((tx) => {
    for (let index = 0; index < running; index++) tx.createTask(stall, null);
    for (let index = 0; index < sleeping; index++) tx.createTask(idle, null);
  }, ctx);
  harness.resume();
  const settled = async () => {
    const [row] = await harness.query("SELECT count(*) AS n FROM tasks WHERE status = 'sleeping'");
    return row!.n === sleeping;
  };
  await runUntil(clock, settled);
  return storage.exportImage(); // the crash: never closed
}

describe("the open's validation of the live rows (decision 0082)", () => {
  it("B4: json_valid's depth boundary is STORED_DEPTH_LIMIT's — 1,000 levels sound, 1,001 refused, by SQLite and by the load", async () => {
    expect(STORED_DEPTH_LIMIT).toBe(1000);
    const storage = await openSqliteStorage({ vfs: "memory" });
    for (const [levels, sound] of [
      [STORED_DEPTH_LIMIT - 1, true],
      [STORED_DEPTH_LIMIT, true],
      [STORED_DEPTH_LIMIT + 1, false],
      [STORED_DEPTH_LIMIT + 2, false],
    ] as const) {
      const text = nestedRecord(levels);
      const [row] = await storage.database.all("SELECT json_valid(?) AS valid", text);
      expect([levels, row!.valid]).toEqual([levels, sound ? 1 : 0]);
      const damaged: DamagedRow[] = [];
      const parsed: unknown[] = [];
      parseInto("tasks", 7, text, parsed, damaged);
      expect([levels, parsed.length, damaged.length]).toEqual([levels, sound ? 1 : 0, sound ? 0 : 1]);
    }
    await storage.close();
  });

  it.each([
    ["not JSON", `'{"id": 5, broken'`],
    ["nested past the limit", `substr(record, 1, length(record) - 1) || ',"x":' || ? || '}'`],
    // Before this record the load read `state.status` of a null state: a TypeError, not the refusal.
    ["a null state", `json_set(record, '$.state', json('null'))`],
    // SQLite's JSON functions read the first of duplicated keys, JSON.parse the last: this one's last state is null.
    ["a duplicated state whose last is not an object", `substr(record, 1, length(record) - 1) || ',"state":null}'`],
  ])(
    "B4, S4: a damaged sleeping row at the largest id (%s) refuses the open before the recount is written",
    async (_what, value) => {
      const storage = await openSqliteStorage({ vfs: "memory", image: await crashed(200, 300) });
      const deep = `${"[".repeat(STORED_DEPTH_LIMIT)}${"]".repeat(STORED_DEPTH_LIMIT)}`;
      const changed = await storage.database.run(
        `UPDATE tasks SET record = ${value} WHERE id = (SELECT max(id) FROM tasks) AND status = 'sleeping'`,
        ...(value.includes("?") ? [deep] : []),
      );
      expect(changed).toBe(1);
      const before = await storage.exportImage();
      const seen = await storage.query(SEED_QUERY);
      for (const resume of [true, false])
        await expect(openHarness(storage, { registry: registry(), resume })).rejects.toBeInstanceOf(DatabaseCorrupt);
      // Nothing was written: no restart counted (S4 waits for a database it can open), the image is the same.
      expect(await storage.exportImage()).toEqual(before);
      expect(await storage.query(SEED_QUERY)).toEqual(seen);
      expect(seen.filter((row) => row.status === "running" && row.restarts === null)).toHaveLength(200);
    },
    60_000,
  );
});
