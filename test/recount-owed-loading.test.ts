// S4, S6: the windows a crashed open left, applied at the load to every live record just parsed, test each group of equal
// windows once, with their number as the restarts a row in them owes (decision 0119: every open's window is usually equal
// to the one before, and the walk is of every live record, in front of the first step). Against the walk it replaced
// (every window tested on every record), over random records (running or not, restarts absent or counted, progress
// stamps of every kind) and windows (equal and near-equal ones with either keep-running flag, overlapping, disjoint, empty): the same
// restarts, the same states (pending at the same checkpoint, its stamp kept as `pendingAt` keeps it), and the same
// number of rows owed (what the first writing transaction's count must find, `settle`). It fails when equal windows
// count once, when one of them that makes its rows pending is ignored, when a row is counted once per window, or when
// windows are grouped by their bounds alone (the written ids ignored). (The
// load with two equal windows on 2,500 rows is test/recount-slices' "…then two equal windows, keep them owed…".)
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { pendingAt } from "../src/storage/progress.ts";
import type { TaskRecord } from "../src/storage/records.ts";
import type { SqliteTransaction } from "../src/storage/sqlite/database.ts";
import { type Owed, OwedRecount } from "../src/storage/sqlite/recount-owed.ts";

/** The walk `loaded` did before decision 0119, written out: each window tested on each running record. */
function before(windows: readonly Owed[], tasks: TaskRecord[]): number {
  let count = 0;
  for (const task of tasks) {
    if (task.state.status !== "running") continue;
    let owed = 0;
    let pending = false;
    for (const w of windows)
      if (task.id > w.after && task.id <= w.through && !w.written.includes(task.id)) {
        owed++;
        pending ||= !w.keepRunning;
      }
    if (owed === 0) continue;
    if (pending) task.state = pendingAt(task.state);
    task.restarts = (task.restarts ?? 0) + owed;
    count++;
  }
  return count;
}

const MAX_ID = 60;
const idArb = fc.integer({ min: -2, max: MAX_ID + 2 });
const windowArb = fc.record({
  after: idArb,
  through: idArb,
  keepRunning: fc.boolean(),
  written: fc.uniqueArray(fc.integer({ min: 1, max: MAX_ID }), { maxLength: 5 }),
});
/**
 * Windows: random ones, and copies of one with either flag — equal (the same rows, the written ids in the same order,
 * reversed or one repeated) and near-equal (the same bounds with other written ids, one more or one fewer, a bound
 * moved by one): a crashed open's kept window beside the next open's window with the same bounds and nothing written
 * is the history where grouping by bounds alone would count a row twice (the review of 0119).
 */
const copyArb = fc.tuple(
  fc.nat(),
  fc.boolean(),
  fc.constantFrom("same", "reversed", "repeated", "other", "plus", "minus", "after", "through"),
  fc.uniqueArray(fc.integer({ min: 1, max: MAX_ID }), { maxLength: 3 }),
  fc.constantFrom(-1, 1),
);
const windowsArb = fc
  .tuple(fc.array(windowArb, { minLength: 1, maxLength: 3 }), fc.array(copyArb, { maxLength: 4 }))
  .chain(([fresh, copies]) => {
    const out: Owed[] = [...fresh];
    for (const [from, keepRunning, how, other, by] of copies) {
      const base = out[from % out.length]!;
      const written = [...base.written];
      if (how === "reversed") written.reverse();
      else if (how === "repeated" && written.length > 0) written.push(written[0]!);
      else if (how === "other") written.splice(0, written.length, ...other);
      else if (how === "plus") written.push(...other.filter((id) => !written.includes(id)).slice(0, 1));
      else if (how === "minus") written.pop();
      const after = base.after + (how === "after" ? by : 0);
      const through = base.through + (how === "through" ? by : 0);
      out.push({ after, through, keepRunning, written });
    }
    return fc.shuffledSubarray(out, { minLength: out.length, maxLength: out.length });
  });
const stampArb = fc.oneof(
  fc.constant(undefined),
  fc.integer({ min: -5, max: 50 }),
  fc.constant(1.5),
  fc.constant(2 ** 60),
  fc.constant("8"),
);
const taskArb = (id: number) =>
  fc
    .record({
      status: fc.constantFrom("running", "running", "running", "pending", "sleeping", "waiting"),
      restarts: fc.oneof(fc.constant(undefined), fc.integer({ min: 0, max: 4 })),
      progressed: stampArb,
      n: fc.nat({ max: 9 }),
    })
    .map(({ status, restarts, progressed, n }) => {
      const state: Record<string, unknown> = { status, checkpoint: { phase: "p", n } };
      if (status === "sleeping") state.until = 5;
      if (status === "waiting") Object.assign(state, { on: [1], policy: "all" });
      if (progressed !== undefined) state.progressed = progressed;
      const task = { id, kind: "k", version: 1, input: {}, state } as unknown as TaskRecord;
      if (restarts !== undefined) task.restarts = restarts;
      return task;
    });
const tasksArb = fc
  .uniqueArray(fc.integer({ min: 1, max: MAX_ID }), { maxLength: 40 })
  .chain((ids) => fc.tuple(...ids.map(taskArb)) as fc.Arbitrary<TaskRecord[]>);

describe("decision 0119: the owed windows applied at the load, equal ones tested once", () => {
  it("S4, S6: the same restarts, states and rows owed as every window tested on every record (property)", () => {
    fc.assert(
      fc.property(windowsArb, tasksArb, (windows, tasks) => {
        const original = structuredClone(tasks);
        const expected = structuredClone(tasks);
        const owedRows = before(windows, expected);
        const owed = new OwedRecount("test");
        owed.loaded(JSON.stringify(windows), tasks);
        expect(tasks).toEqual(expected);
        // The first writing transaction counts the rows the windows owe (here: the model's number) and refuses any other.
        const tx = { run: () => owedRows, get: () => undefined, all: () => [] } as unknown as SqliteTransaction;
        expect(() => owed.settle(tx)).not.toThrow();
        const wrong = { run: () => owedRows + 1, get: () => undefined, all: () => [] } as unknown as SqliteTransaction;
        expect(() => new OwedRecount("test").settle(wrong)).not.toThrow(); // nothing loaded: nothing to count
        const again = new OwedRecount("test");
        again.loaded(JSON.stringify(windows), original);
        expect(() => again.settle(wrong)).toThrow(/owed restarts counted/);
      }),
      { numRuns: 500, seed: 119 },
    );
  });
});
