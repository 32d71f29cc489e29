import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { deepFreeze, type Json } from "../src/base/json.ts";
import type { EntryRecord, TaskRecord, TaskState } from "../src/storage/records.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import type { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { type TaskText, taskText } from "../src/storage/sqlite/task-text.ts";
import { taskRecord } from "./task-record.ts";

// Decision 0041: a task's record text reuses the text of its last version when only its state changed. The
// text must stay `JSON.stringify(record)` exactly, whatever changed and however the record was built.

const checkpoint = fc.record({ phase: fc.string(), n: fc.integer() }, { requiredKeys: ["phase"] }) as fc.Arbitrary<{
  phase: string;
  [key: string]: Json;
}>;
const state: fc.Arbitrary<TaskState> = fc.oneof(
  fc.record({ status: fc.constantFrom("pending" as const, "running" as const), checkpoint }),
  fc.record({ status: fc.constant("sleeping" as const), checkpoint, until: fc.integer() }),
  fc.record({ checkpoint, status: fc.constant("running" as const) }), // another key order
  // A member between the two (decision 0077 walks the state's keys with for…in): the text must keep it.
  fc.record({ status: fc.constant("running" as const), note: fc.string(), checkpoint }),
  // Decision 0112: a step's state carries its progress stamp after the checkpoint; the text spells a safe integer
  // itself and leaves any other value (or another place for it) to JSON.
  fc.record({
    status: fc.constantFrom("pending" as const, "running" as const),
    checkpoint,
    progressed: fc.oneof(
      fc.maxSafeInteger(),
      fc.constantFrom(-0, 2 ** 53, 2 ** 60, Number.NaN, Number.POSITIVE_INFINITY, 1.5, null, undefined),
      fc.string(),
    ),
  }),
  fc.record({ status: fc.constant("running" as const), progressed: fc.maxSafeInteger(), checkpoint }),
  fc.record({ status: fc.constant("running" as const), checkpoint, progressed: fc.maxSafeInteger(), note: fc.string() }),
  fc.record({
    status: fc.constant("terminal" as const),
    outcome: fc.record({ status: fc.constant("completed" as const), result: fc.jsonValue() }),
  }),
) as fc.Arbitrary<TaskState>;

const record = fc.record(
  {
    id: fc.integer({ min: 1 }),
    conversationId: fc.integer({ min: 1 }),
    kind: fc.string(),
    version: fc.integer(),
    input: fc.jsonValue(),
    owner: fc.integer({ min: 1 }),
    background: fc.boolean(),
    abortRequested: fc.boolean(),
    startedAt: fc.integer(),
    state,
    memos: fc.dictionary(fc.string(), fc.jsonValue()),
    restarts: fc.integer({ min: 1 }),
  },
  { requiredKeys: ["id", "conversationId", "kind", "version", "input", "background", "abortRequested", "state"] },
) as unknown as fc.Arbitrary<TaskRecord>;

/** What the next version of a record does: a new state (the usual step), another member, or a member's value changed in place. */
const change = fc.oneof(
  fc.record({ kind: fc.constant("state" as const), state }),
  fc.record({
    kind: fc.constant("member" as const),
    key: fc.constantFrom("input", "memos", "restarts", "abortRequested", "endedAt"),
    value: fc.jsonValue(),
  }),
  fc.record({ kind: fc.constant("mutate" as const), value: fc.jsonValue() }),
);

describe("task record text (decision 0041)", () => {
  it("S1: every version's text is JSON.stringify of the record, through steps, other changes, frozen or not", () => {
    fc.assert(
      fc.property(record, fc.array(fc.tuple(change, fc.boolean()), { maxLength: 12 }), fc.boolean(), (first, changes, freezeFirst) => {
        let current: TaskRecord = structuredClone(first);
        if (freezeFirst) deepFreeze(current);
        let last: TaskText | undefined;
        for (const [step, freeze] of [[undefined, false] as const, ...changes]) {
          if (step?.kind === "state") current = { ...current, state: step.state };
          else if (step?.kind === "member") current = { ...current, [step.key]: step.value };
          else if (step?.kind === "mutate") {
            // A caller that kept an unfrozen member and changed it: its old text must not be reused.
            const input = current.input;
            if (typeof input === "object" && input !== null && !Object.isFrozen(input) && !Array.isArray(input))
              (input as Record<string, Json>).changed = step.value as Json;
            current = { ...current, state: { ...current.state } as TaskState };
          }
          if (freeze) deepFreeze(current);
          const { record: text, pieces, spliced } = taskText(current, last);
          expect(text).toBe(JSON.stringify(current));
          if (spliced) pieces!.record = current; // stored: as SqliteStorage.apply moves the pieces on
          last = pieces;
        }
      }),
      { numRuns: 300 },
    );
  });

  it("leaves out undefined members as JSON does, and falls back to JSON for a record with toJSON", () => {
    const base = deepFreeze(taskRecord(1, { status: "running", checkpoint: { phase: "p" } }, { input: { a: 1 } }));
    const first = taskText(base, undefined);
    const withUndefined = { ...base, owner: undefined, state: { status: "running", checkpoint: { phase: "q" } } } as TaskRecord;
    expect(taskText(withUndefined, first.pieces).record).toBe(JSON.stringify(withUndefined));
    const odd = { ...base, toJSON: () => ({ odd: true }) } as unknown as TaskRecord;
    expect(taskText(odd, first.pieces).record).toBe('{"odd":true}');
  });
});

/**
 * The pieces as decision 0041 cut them before decision 0121 (each member's text appended with `+=`): the reference the
 * joined pieces must equal, text for text.
 */
function oldPieces(task: TaskRecord): { head: string; tail: string } | undefined {
  const record = task as unknown as Record<string, unknown>;
  let head = "{";
  let tail: string | undefined;
  let separator = "";
  for (const key of Object.keys(record)) {
    if (key === "state") {
      head += `${separator}"state":`;
      tail = "";
      separator = ",";
      continue;
    }
    const value = JSON.stringify(record[key]);
    if (value === undefined) continue;
    const text = `${separator}${JSON.stringify(key)}:${value}`;
    if (tail === undefined) head += text;
    else tail += text;
    separator = ",";
  }
  return tail === undefined ? undefined : { head, tail: `${tail}}` };
}

/** Any text: lone surrogates, quotes, backslashes, controls, U+2028 (JSON escapes some, keeps others). */
const hostile = fc.oneof(
  fc.string({ unit: "binary" }),
  fc.constantFrom('"', "\\", "\u2028\u2029", "\ud800", "\udfff}", '","state":{', "\u0000\u001f", "</script>"),
);
const hostileJson = fc.jsonValue({ stringUnit: "binary" });

describe("a task's cached pieces are joined once (decision 0121)", () => {
  it("S1: the joined head and tail are the old pieces text for text, and every spliced step is JSON.stringify, hostile text included", () => {
    fc.assert(
      fc.property(
        fc.dictionary(hostile, hostileJson, { maxKeys: 6 }),
        fc.nat(8),
        hostile,
        fc.array(fc.tuple(hostile, fc.integer()), { minLength: 1, maxLength: 6 }),
        (extra, at, kind, steps) => {
          // The state at any place among the members (first, between hostile keys, last), members hostile too.
          const entries: [string, unknown][] = Object.entries({ ...extra, kind, input: { text: kind } }).filter(([key]) => key !== "state");
          entries.splice(Math.min(at, entries.length), 0, ["state", { status: "running", checkpoint: { phase: kind, n: 0 } }]);
          let current = deepFreeze(Object.fromEntries(entries)) as unknown as TaskRecord;
          const first = taskText(current, undefined);
          expect(first.record).toBe(JSON.stringify(current));
          const old = oldPieces(current);
          if (first.pieces === undefined) return; // not cut (a member JSON spells otherwise): whole texts, as before
          expect(old).toBeDefined();
          expect(first.pieces.head).toBe(old!.head);
          expect(first.pieces.tail).toBe(old!.tail);
          let last = first.pieces;
          for (const [phase, n] of steps) {
            current = deepFreeze({ ...current, state: { status: "running", checkpoint: { phase, n } } } as TaskRecord);
            const row = taskText(current, last);
            expect(row.spliced).toBe(true);
            expect(row.record).toBe(JSON.stringify(current));
            row.pieces!.record = current;
            last = row.pieces!;
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe("SqliteStorage writes each task's text as JSON.stringify of its record (decision 0041)", () => {
  const open: SqliteStorage[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((storage) => storage.close()));
  });

  it("S1: the stored record column is the record's JSON after every kind of commit, and reads back equal", async () => {
    await fc.assert(
      fc.asyncProperty(record, fc.array(change, { maxLength: 8 }), async (first, changes) => {
        const storage = await openSqliteStorage({ vfs: "memory" });
        open.push(storage);
        let current = deepFreeze({
          ...structuredClone(first),
          id: 10,
          state: { status: "running", checkpoint: { phase: "p" } },
        } as TaskRecord);
        const empty = { conversations: [], entries: [], submissions: [], documents: [] };
        await storage.apply({ ...empty, tasks: [current] });
        for (const step of changes) {
          current = deepFreeze(
            step.kind === "state"
              ? { ...current, state: step.state }
              : step.kind === "member"
                ? { ...current, [step.key]: step.value }
                : { ...current, state: { status: "running", checkpoint: { phase: "x", n: 1 } } as TaskState },
          );
          await storage.apply({ ...empty, tasks: [current] });
          const rows = await storage.query("SELECT record FROM tasks WHERE id = 10");
          expect(rows[0]?.record).toBe(JSON.stringify(current));
          expect(await storage.getTask(10)).toEqual(JSON.parse(JSON.stringify(current)));
          if (current.state.status === "terminal") break;
        }
      }),
      { numRuns: 40 },
    );
  });
});

describe("SqliteStorage writes a group's task rows several to a statement (decision 0041)", () => {
  const open: SqliteStorage[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((storage) => storage.close()));
  });

  const task = (id: number, status: "pending" | "running" | "sleeping", n: number): TaskRecord =>
    deepFreeze(taskRecord(id, { status, checkpoint: { phase: "p", n } }, { input: { id } }));

  it("S1: after each batch every row holds its task's last record and status, whatever mix of new, stepped, moved and vanished rows", async () => {
    const empty = { conversations: [], entries: [], submissions: [], documents: [] };
    const plan = fc.array(
      fc.record({
        ids: fc.uniqueArray(fc.integer({ min: 1, max: 90 }), { maxLength: 80 }),
        status: fc.constantFrom("pending" as const, "running" as const, "sleeping" as const),
        vanish: fc.array(fc.integer({ min: 1, max: 90 }), { maxLength: 3 }),
        // Tasks the batch names a second time, later, in another status (a pushed batch may): the last one wins.
        again: fc.array(fc.nat({ max: 79 }), { maxLength: 3 }),
      }),
      { minLength: 1, maxLength: 6 },
    );
    await fc.assert(
      fc.asyncProperty(plan, async (batches) => {
        const storage = await openSqliteStorage({ vfs: "memory" });
        open.push(storage);
        const expected = new Map<number, TaskRecord>();
        for (const [n, { ids, status, vanish, again }] of batches.entries()) {
          // A row gone behind the storage's back: its cached status says live, the statement finds no row.
          for (const id of vanish) {
            await storage.database.run("DELETE FROM tasks WHERE id = ?", id);
            expected.delete(id);
          }
          // Most keep their status (a step), one in three moves.
          const tasks = ids.map((id, index) =>
            task(id, index % 3 === 0 ? status : ((expected.get(id)?.state.status as "running") ?? status), n),
          );
          // Named again in the status stored before the batch, or in another one.
          for (const [k, index] of again.entries()) {
            const id = ids[index - (index % 3)]; // one of those this batch may move first
            if (id === undefined) continue;
            const before = (expected.get(id)?.state.status as "running" | undefined) ?? status;
            tasks.push(task(id, k === 1 ? (before === "running" ? "sleeping" : "running") : before, 1000 * n + k));
          }
          await storage.apply({ ...empty, tasks });
          for (const record of tasks) expected.set(record.id, record);
          const rows = await storage.query("SELECT id, status, record FROM tasks ORDER BY id");
          expect(rows).toEqual(
            [...expected.values()]
              .sort((a, b) => a.id - b.id)
              .map((record) => ({ id: record.id, status: record.state.status, record: JSON.stringify(record) })),
          );
        }
      }),
      { numRuns: 100 },
    );
  });
});

/**
 * Counts the statements `storage`'s transactions run (`statements`, reset by the caller). The connection's own methods
 * stay on its own instance (they read private fields; the storage defers by default since decision 0086, which reads
 * the write count and the mark).
 */
function countStatements(storage: SqliteStorage): { statements: number } {
  const count = { statements: 0 };
  const database = storage.database;
  const transaction = database.transaction.bind(database);
  database.transaction = (body) =>
    transaction((tx) => {
      const counted = Object.create(tx) as typeof tx;
      counted.run = (sql, ...params) => {
        count.statements++;
        return tx.run(sql, ...params);
      };
      counted.get = (sql, ...params) => tx.get(sql, ...params);
      counted.all = (sql, ...params) => tx.all(sql, ...params);
      if (tx.writes) counted.writes = () => tx.writes!();
      return body(counted);
    });
  return count;
}

describe("The task rows' writer kept across batches (decision 0083)", () => {
  it("shares statements for a group whose tasks the batch before named too, and goes row by row when one names a task twice", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    try {
      const empty = { conversations: [], entries: [], submissions: [], documents: [] };
      const version = (id: number, n: number, status: "running" | "pending" = "running"): TaskRecord =>
        deepFreeze(taskRecord(id, { status, checkpoint: { phase: "p", n } }, { input: { id } }));
      const count = countStatements(storage);
      const ids = Array.from({ length: 40 }, (_, index) => index + 1);
      const stored = async (tasks: TaskRecord[]) => {
        count.statements = 0;
        await storage.apply({ ...empty, tasks });
        return count.statements;
      };
      await stored(ids.map((id) => version(id, 0)));
      // Steps of tasks the batch before named: 32 + 8 rows in two shared statements, each time.
      expect(await stored(ids.map((id) => version(id, 1)))).toBe(2);
      expect(await stored(ids.map((id) => version(id, 2)))).toBe(2);
      // Task 7 twice, moved first and stepped after: row by row, in order, so its step is what stays.
      const twice = [version(7, 3, "pending"), ...ids.map((id) => version(id, 3))];
      expect(await stored(twice)).toBe(41);
      expect(await storage.query("SELECT status, record FROM tasks WHERE id = 7")).toEqual([
        { status: "running", record: JSON.stringify(version(7, 3)) },
      ]);
      expect(await stored(ids.map((id) => version(id, 4)))).toBe(2);
    } finally {
      await storage.close();
    }
  });
});

describe("A refused transaction after a group's shared statements (decision 0041, B9)", () => {
  it("leaves every row as it was, and the next commit of the same tasks stores each one's own text", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    try {
      const empty = { conversations: [], entries: [], submissions: [], documents: [] };
      const version = (id: number, n: number): TaskRecord =>
        deepFreeze(taskRecord(id, { status: "running", checkpoint: { phase: "p", n } }, { input: { id } }));
      const ids = Array.from({ length: 40 }, (_, index) => index + 1);
      await storage.apply({ ...empty, tasks: ids.map((id) => version(id, 0)) });
      await storage.apply({ ...empty, tasks: ids.map((id) => version(id, 1)) }); // pieces and statuses known
      const before = await storage.query("SELECT id, status, record FROM tasks ORDER BY id");
      // The tasks' rows go first (32 + 8 in shared statements), then an entry SQLite refuses (NOT NULL): all rolled back.
      const broken = { id: 100, conversationId: null, kind: "x", payload: null, at: 0 } as unknown as EntryRecord;
      await expect(storage.apply({ ...empty, entries: [broken], tasks: ids.map((id) => version(id, 2)) })).rejects.toThrow();
      expect(await storage.query("SELECT id, status, record FROM tasks ORDER BY id")).toEqual(before);
      const next = ids.map((id) => version(id, 3));
      await storage.apply({ ...empty, tasks: next });
      expect(await storage.query("SELECT record FROM tasks ORDER BY id")).toEqual(
        next.map((record) => ({ record: JSON.stringify(record) })),
      );
    } finally {
      await storage.close();
    }
  });
});

describe("A batch's new and status-changing task rows share statements (decision 0087)", () => {
  it("S1: new tasks, moved tasks and a mix with steps take a few upserts, and every row holds its last record and status", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    try {
      const empty = { conversations: [], entries: [], submissions: [], documents: [] };
      const version = (id: number, n: number, status: "running" | "pending" | "sleeping" = "running"): TaskRecord =>
        deepFreeze(taskRecord(id, { status, checkpoint: { phase: "p", n } }, { input: { id } }));
      const count = countStatements(storage);
      const stored = async (tasks: TaskRecord[]) => {
        count.statements = 0;
        await storage.apply({ ...empty, tasks });
        expect(
          await storage.query(
            "SELECT id, status, record FROM tasks WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id",
            JSON.stringify(tasks.map((t) => t.id)),
          ),
        ).toEqual(
          [...tasks].sort((a, b) => a.id - b.id).map((task) => ({ id: task.id, status: task.state.status, record: JSON.stringify(task) })),
        );
        return count.statements;
      };
      const ids = Array.from({ length: 40 }, (_, index) => index + 1);
      // 40 new tasks: 16 + 16 + 8 rows in three upserts (80 statements before: an update that found nothing, then an insert).
      expect(await stored(ids.map((id) => version(id, 0, "pending")))).toBe(3);
      // All 40 move (a pass's claims): three upserts (40 updates before).
      expect(await stored(ids.map((id) => version(id, 1)))).toBe(3);
      // 20 steps and 20 moves (a group's last steps): 16 + 4 steps, then 16 + 4 upserts (22 statements before).
      expect(await stored(ids.map((id) => version(id, 2, id % 2 === 0 ? "sleeping" : "running")))).toBe(4);
      // 38 moves and one new task: 16 + 16 + 4 + 2 upserted, the last one alone (an update, then an insert).
      expect(await stored([...ids.slice(2).map((id) => version(id, 3, "pending")), version(41, 0, "pending")])).toBe(6);
    } finally {
      await storage.close();
    }
  });
});
