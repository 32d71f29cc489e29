// S4, S11: the recovery commit keeps the restart windows earlier opens left only when they owe exactly what the load
// applied (decision 0116, "later": equal windows counted once, one window as its range's running rows minus its written
// ids). Against the statement it replaced (every window's bounds and written ids tested row by row) and a model, over
// random tables, windows (equal, reordered, duplicated, shifted, nested, disjoint, empty) and written ids (outside
// the range, on rows not running, repeated), with a load that may differ from the stored rows. From the read-only
// review of 9d4b1a0; it fails when the written ids' status or range filter, their de-duplication, or the windows'
// equality is weakened.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { TaskRecord } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { type Owed, OwedRecount, RECOUNT_SLICE } from "../src/storage/sqlite/recount-owed.ts";

const RUNNING = `status <> 'terminal' AND status = 'running'`;
const inWindow = (i: number) => `(id > ?${3 + 3 * i} AND id <= ?${4 + 3 * i} AND id NOT IN (SELECT value FROM json_each(?${5 + 3 * i})))`;
const oldSql = (n: number) =>
  `SELECT count(*) AS n FROM tasks INDEXED BY tasks_live WHERE ${RUNNING} AND id > ?1 AND id <= ?2 AND (${Array.from({ length: n }, (_, i) => inWindow(i)).join(" OR ")})`;

const STATUSES = ["running", "pending", "terminal", "waiting"] as const;
const N = RECOUNT_SLICE * 2; // ids 1..N; running rows must exceed a slice for open() to be used

/** Model: rows stored running that any window holds (each once). */
function model(status: Map<number, string>, windows: readonly Owed[]): number {
  let n = 0;
  for (const [id, s] of status) if (s === "running" && windows.some((w) => id > w.after && id <= w.through && !w.written.includes(id))) n++;
  return n;
}

const idArb = fc.integer({ min: -3, max: N + 3 });
const windowArb = fc.record({
  after: idArb,
  through: idArb,
  keepRunning: fc.constant(true),
  written: fc.array(fc.oneof(idArb, fc.integer({ min: N - 20, max: N })), { maxLength: 12 }),
});
/** Windows: random, plus copies (identical), permuted/duplicated-written near-copies, overlapping shifts. */
const windowsArb = fc
  .tuple(
    windowArb,
    fc.array(
      fc.oneof(
        fc.constant({ kind: "same" as const }),
        fc.constant({ kind: "reversed" as const }),
        fc.constant({ kind: "dup" as const }),
        fc.record({ kind: fc.constant("shift" as const), da: fc.integer({ min: -50, max: 50 }), dt: fc.integer({ min: -50, max: 50 }) }),
        fc.record({ kind: fc.constant("fresh" as const), w: windowArb }),
        fc.record({ kind: fc.constant("throughOnly" as const), dt: fc.integer({ min: -50, max: 50 }) }),
        fc.record({ kind: fc.constant("afterOnly" as const), da: fc.integer({ min: -50, max: 50 }) }),
        fc.record({ kind: fc.constant("written" as const), w: fc.array(fc.integer({ min: 1, max: N }), { maxLength: 4 }) }),
        fc.record({ kind: fc.constant("writtenPlus" as const), id: fc.integer({ min: 1, max: N }) }),
      ),
      { maxLength: 3 },
    ),
  )
  .map(([first, more]) => {
    const out: Owed[] = [first];
    for (const m of more) {
      const base = out[out.length - 1]!;
      if (m.kind === "same") out.push({ ...base, written: [...base.written] });
      else if (m.kind === "reversed") out.push({ ...base, written: [...base.written].reverse() });
      else if (m.kind === "dup") out.push({ ...base, written: [...base.written, ...base.written.slice(0, 1)] });
      else if (m.kind === "shift") out.push({ ...base, after: base.after + m.da, through: base.through + m.dt });
      else if (m.kind === "throughOnly") out.push({ ...base, through: base.through + m.dt });
      else if (m.kind === "afterOnly") out.push({ ...base, after: base.after + m.da });
      else if (m.kind === "written") out.push({ ...base, written: m.w });
      else if (m.kind === "writtenPlus") out.push({ ...base, written: [...base.written, m.id] });
      else out.push(m.w);
    }
    return out;
  });

describe("S4, S11: the kept restart windows' owed count (decision 0116)", () => {
  it("S4, S11: agrees with the statement it replaced and the model; accepts exactly when that statement would", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    const db = storage.database;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom(...STATUSES), { minLength: N, maxLength: N }).map((s) => s.map((x, i) => (i % 2 === 0 ? "running" : x))),
        windowsArb,
        // perturbations of the load against the stored rows: [id, status the load saw]
        fc.array(fc.tuple(fc.integer({ min: 1, max: N }), fc.constantFrom(...STATUSES)), { maxLength: 3 }),
        async (statuses, windows, perturb) => {
          const stored = new Map<number, string>(statuses.map((s, i) => [i + 1, s]));
          const loadedStatus = new Map(stored);
          for (const [id, s] of perturb) loadedStatus.set(id, s);
          // The table.
          await db.transaction((tx) => {
            tx.run("DELETE FROM tasks");
            for (const [id, s] of stored)
              tx.run("INSERT INTO tasks (id, conversation_id, kind, status, record) VALUES (?, 0, 'k', ?, ?)", id, s, `{"restarts":0}`);
          });
          const ids = [...stored].filter(([, s]) => s === "running").map(([id]) => id);
          if (ids.length <= RECOUNT_SLICE) return;
          const tasks = [...loadedStatus].map(([id, s]) => ({ id, state: { status: s }, restarts: 0 }) as unknown as TaskRecord);
          const owed = new OwedRecount("scratch");
          owed.loaded(JSON.stringify(windows), tasks);
          const expectedLoad = model(loadedStatus, windows);
          expect(owed.keeps(ids)).toBe(windows.length < 4);
          if (windows.length >= 4) return;
          const result = await db
            .transaction((tx) => {
              const old = Number(
                tx.get(
                  oldSql(windows.length),
                  Math.min(...windows.map((w) => w.after)),
                  Math.max(...windows.map((w) => w.through)),
                  ...windows.flatMap((w) => [w.after, w.through, JSON.stringify(w.written)]),
                )?.n,
              );
              const ok = owed.open(tx, true, ids);
              throw { old, ok };
            })
            .catch((e: { old: number; ok: boolean }) => e);
          owed.ended(false);
          const truth = model(stored, windows);
          expect(result.old).toBe(truth); // the old statement is the model on the stored rows
          // open() (last check also needs COUNT_IN(0, through) === ids.length, true since ids are all running rows)
          expect(result.ok).toBe(result.old === expectedLoad); // new agrees exactly when the old would
        },
      ),
      { numRuns: 300, seed: 116 },
    );
  }, 600_000);
});
