import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { deepFreeze } from "../src/base/json.ts";
import { LogOutOfOrder, StaleEpoch } from "../src/errors.ts";
import type { Batch } from "../src/storage/records.ts";
import { batchText, stepText } from "../src/storage/sqlite/log-write.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { openSqliteDatabase } from "../src/storage/sqlite/wasm.ts";
import { stepped } from "./sqlite-support.ts";
import { taskRecord } from "./task-record.ts";

// Decision 0042: a fenced transaction's log row is made of its rows' own texts, and a transaction that continues
// this storage's own head under the same epoch checks the fence with one compare-and-set. The log must hold
// exactly what it held before, and every writer that did not see the last write must still be refused (S11).

const json = fc.jsonValue({ maxDepth: 3 });
const batch: fc.Arbitrary<Batch> = fc.record(
  {
    fence: fc.record({ epoch: fc.integer({ min: 1 }), position: fc.integer({ min: 1 }) }),
    nextId: fc.integer({ min: 1 }),
    rootConversationId: fc.integer({ min: 1 }),
    tasks: fc.array(fc.record({ id: fc.integer({ min: 1 }), state: fc.record({ status: fc.constant("running"), checkpoint: json }) })),
    conversations: fc.array(fc.record({ id: fc.integer({ min: 1 }), title: fc.string() })),
    entries: fc.array(fc.record({ id: fc.integer({ min: 1 }), conversationId: fc.integer(), kind: fc.string(), content: json })),
    submissions: fc.array(
      fc.record({ id: fc.integer({ min: 1 }), status: fc.string(), requestId: fc.option(fc.string(), { nil: undefined }) }),
    ),
    documents: fc.array(fc.record({ scope: fc.string(), key: fc.string(), value: fc.option(json, { nil: null }) })),
  },
  { requiredKeys: ["tasks", "conversations", "entries", "submissions", "documents"] },
) as unknown as fc.Arbitrary<Batch>;

// Fences a batch may carry: plain marks and every shape JSON spells otherwise (decision 0118).
const number = fc.oneof(fc.integer(), fc.double(), fc.constant(-0), fc.constant(Number.NaN), fc.constant(Number.POSITIVE_INFINITY));
const fence = fc.oneof(
  fc.record({ epoch: fc.integer({ min: 1 }), position: fc.integer({ min: 1 }) }),
  fc.record({ epoch: number, position: number }),
  fc.record({ position: number, epoch: number }),
  fc.record({ epoch: number, position: number, note: fc.string() }),
  fc.record({ epoch: fc.string(), position: number }),
  fc.record({ epoch: number }),
  fc.constant(Object.assign(Object.create({ epoch: 1 }), { position: 2 })),
  fc.constant(Object.defineProperty({ epoch: 1, position: 2 }, "hidden", { value: 3, enumerable: false })),
  fc.constant({ epoch: 1, position: 2, toJSON: () => "mark" }),
  fc.constant(Object.assign(Object.create({ toJSON: () => "inherited" }), { epoch: 1, position: 2 })),
  fc.constant(null),
  fc.constant(undefined),
);

const texts = (value: Batch) => ({
  tasks: value.tasks.map((item) => JSON.stringify(item)),
  conversations: value.conversations.map((item) => JSON.stringify(item)),
  entries: value.entries.map((item) => JSON.stringify(item)),
  submissions: value.submissions.map((item) => JSON.stringify(item)),
  documents: value.documents.map((item) => JSON.stringify(item)),
});

describe("the fenced log's row (decision 0042)", () => {
  it("S11: a transaction's log text is JSON.stringify of its batch, whatever it carries and in whatever key order", () => {
    fc.assert(
      fc.property(batch, fc.boolean(), (value, shuffle) => {
        const ordered = shuffle ? (Object.fromEntries(Object.entries(value).reverse()) as unknown as Batch) : value;
        expect(batchText(ordered, texts(ordered))).toBe(JSON.stringify(ordered));
      }),
      { numRuns: 300 },
    );
  });

  it("0118 S11: a step's batch (its members in the session's order) is JSON.stringify's text whatever its fence and rows", () => {
    // The session's order (a step's), that order with a member after it, and an inherited member (JSON leaves it out).
    const shape = fc.constantFrom("step", "extra", "inherited");
    fc.assert(
      fc.property(batch, fence, shape, (value, mark, kind) => {
        const { tasks, conversations, entries, submissions, documents } = value;
        const step = { tasks, conversations, entries, submissions, documents, fence: mark };
        const made = (kind === "step"
          ? step
          : kind === "extra"
            ? { ...step, nextId: 7 }
            : Object.assign(Object.create({ nextId: 7 }), step)) as unknown as Batch;
        expect(batchText(made, texts(made))).toBe(JSON.stringify(made));
      }),
      { numRuns: 400 },
    );
  });

  it("0120 S11: a lone task's step is spelled as JSON.stringify spells its batch, whatever its record, fence, members and epoch before it", () => {
    // Hostile text: every UTF-16 unit (lone surrogates included) and whole graphemes, in the record and its checkpoint.
    const text = fc.oneof(fc.string({ unit: "binary" }), fc.string({ unit: "grapheme" }));
    const record = fc.record({
      id: fc.integer({ min: 1 }),
      kind: text,
      input: fc.jsonValue({ maxDepth: 2 }),
      state: fc.record({ status: fc.constant("running"), checkpoint: fc.record({ phase: text, note: fc.array(text, { maxLength: 3 }) }) }),
      startedAt: fc.option(fc.integer(), { nil: undefined }),
    });
    const shape = fc.constantFrom("step", "extra", "inherited");
    fc.assert(
      fc.property(batch, record, fence, shape, fc.boolean(), fc.integer({ min: 1 }), (value, task, mark, kind, alone, other) => {
        const lists = alone ? { conversations: [], entries: [], submissions: [], documents: [] } : value;
        const { conversations, entries, submissions, documents } = lists;
        const lone = conversations.length + entries.length + submissions.length + documents.length === 0;
        const step = { tasks: [task], conversations, entries, submissions, documents, fence: mark };
        const made = (kind === "step"
          ? step
          : kind === "extra"
            ? { ...step, nextId: 7 }
            : Object.assign(Object.create({ nextId: 7 }), step)) as unknown as Batch;
        // Another epoch's step first: the text kept for the last epoch is not this one's.
        stepText({ ...step, fence: { epoch: other, position: 1 } } as unknown as Batch, JSON.stringify(task));
        const spelled = stepText(made, JSON.stringify(task));
        expect(spelled ?? batchText(made, texts(made))).toBe(JSON.stringify(made));
        const plain =
          typeof mark === "object" &&
          mark !== null &&
          Object.keys(mark).join() === "epoch,position" &&
          Object.getPrototypeOf(mark) === Object.prototype;
        if (kind !== "extra" && lone && plain && Number.isFinite(mark.epoch) && Number.isFinite(mark.position))
          expect(spelled).toBeDefined(); // the step's own path (an inherited member JSON leaves out too), not batchText's
        else if (kind === "extra" || !lone) expect(spelled).toBeUndefined();
      }),
      { numRuns: 400 },
    );
  });

  it("0120 S11: a fence whose members are accessors is read once — the text is what JSON.stringify spells, never a member that answered the check one value and the text another", () => {
    const task = taskRecord(3, { status: "running", checkpoint: { phase: "step", n: 1 } });
    const lists = { conversations: [], entries: [], submissions: [], documents: [] };
    // Each accessor answers a number at its first read and text that would close the fence and add a member after.
    const shifty = (first: number, then: string) => {
      let reads = 0;
      return () => (++reads === 1 ? first : then);
    };
    fc.assert(
      fc.property(fc.constantFrom("epoch", "position"), fc.boolean(), fc.integer({ min: 0, max: 2 ** 40 }), (which, extra, value) => {
        const read = shifty(value, `${value},"position":0},"injected":{"x":1`);
        const mark = Object.defineProperties(
          {},
          {
            epoch: which === "epoch" ? { get: read, enumerable: true } : { value: 7, enumerable: true },
            position: which === "position" ? { get: read, enumerable: true } : { value: 9, enumerable: true },
          },
        );
        const made = { tasks: [task], ...lists, fence: mark, ...(extra ? { nextId: 4 } : {}) } as unknown as Batch;
        const spelled = stepText(made, JSON.stringify(task)) ?? batchText(made, texts(made));
        expect(spelled).not.toContain("injected");
        expect(JSON.parse(spelled)).toEqual(
          JSON.parse(
            JSON.stringify({ ...made, fence: { epoch: which === "epoch" ? value : 7, position: which === "position" ? value : 9 } }),
          ),
        );
      }),
      { numRuns: 100 },
    );
  });

  it("0120 S11: a deferring storage's lone-task steps store and return JSON.stringify's text byte for byte, across epochs, hostile checkpoints included", async () => {
    const encoder = new TextEncoder();
    const checkpoint = fc.record({ phase: fc.string({ unit: "binary" }), n: fc.integer(), note: fc.string({ unit: "grapheme" }) });
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(checkpoint, fc.integer({ min: 1, max: 3 })), { minLength: 1, maxLength: 12 }), async (steps) => {
        const storage = await openSqliteStorage({ vfs: "memory" });
        await storage.load();
        let task = deepFreeze(taskRecord(7, { status: "running", checkpoint: { phase: "start" } }, { kind: "k\u{1F600}\uD800" }));
        let epoch = 1;
        let position = 1;
        const fenced = (tasks: Batch["tasks"]): Batch =>
          ({ tasks, conversations: [], entries: [], submissions: [], documents: [], fence: { epoch, position } }) as unknown as Batch;
        await storage.apply(fenced([task]));
        for (const [next, bump] of steps) {
          position++;
          if (bump === 3) epoch++;
          // A committed step: the record spread from the last one (its other members the same frozen values), frozen.
          task = deepFreeze({ ...task, state: { status: "running", checkpoint: next } });
          const step = fenced([task]);
          const text = await storage.apply(step);
          expect(text).toBe(JSON.stringify(step));
          const row = await storage.database.get("SELECT CAST(batch AS BLOB) AS bytes FROM pi_durable_log WHERE position = ?", position);
          expect(row?.bytes).toEqual(encoder.encode(JSON.stringify(step)));
        }
        expect(await storage.getTask(7)).toEqual(JSON.parse(JSON.stringify(task)));
        await storage.close();
      }),
      { numRuns: 60 },
    );
  });

  it("S11: the log stores, and reads back, every transaction as before: the rows and the log agree position by position", async () => {
    const db = await openSqliteDatabase({ vfs: "memory" });
    const storage = await SqliteStorage.open(db);
    await storage.load();
    const written: Batch[] = [];
    for (let position = 1; position <= 40; position++) {
      const next = stepped(7, position, position, position <= 20 ? 1 : 2);
      if (position % 5 === 0) next.documents.push({ scope: "s", key: `k${position}`, value: position % 2 ? null : { position } });
      if (position % 7 === 0) next.nextId = 100 + position;
      await storage.apply(next);
      written.push(JSON.parse(JSON.stringify(next)));
    }
    expect(await storage.readLog(0, 100)).toEqual(written);
    expect(await storage.readEpochs()).toEqual([
      { epoch: 1, start: 1 },
      { epoch: 2, start: 21 },
    ]);
    expect((await storage.load()).log).toEqual({ epoch: 2, position: 40 });
    await db.close();
  });

  it("S11: a writer on the same database that did not see another's writes is refused with nothing written, also after its own fast continuations", async () => {
    const db = await openSqliteDatabase({ vfs: "memory" });
    const first = await SqliteStorage.open(db, "first");
    const second = await SqliteStorage.open(db, "second");
    await first.load();
    await second.load();
    await first.apply(stepped(1, 1, 1, 1));
    await first.apply(stepped(1, 2, 2, 1)); // first continues its own head
    // second still believes the log is empty: the position it takes is already written.
    await expect(second.apply(stepped(2, 1, 1, 1))).rejects.toThrow(LogOutOfOrder);
    // second catches up by reading and writes on under the same epoch (another connection of the same place); first,
    // which knows only its own head (2, epoch 1), is refused although its epoch is the one it wrote last.
    expect((await second.load()).log).toEqual({ epoch: 1, position: 2 });
    await second.apply(stepped(2, 1, 3, 1));
    await expect(first.apply(stepped(1, 3, 3, 1))).rejects.toThrow(LogOutOfOrder);
    // A newer epoch starts: first's next continuation of its own head is refused as stale.
    await second.apply(stepped(2, 2, 4, 2));
    await expect(first.apply(stepped(1, 3, 4, 1))).rejects.toThrow(StaleEpoch);
    expect((await first.load()).log).toEqual({ epoch: 2, position: 4 });
    expect((await first.readLog(0, 10)).map((logged) => [logged.fence.position, logged.fence.epoch, logged.tasks[0]!.id])).toEqual([
      [1, 1, 1],
      [2, 1, 1],
      [3, 1, 2],
      [4, 2, 2],
    ]);
    const rows = await db.all("SELECT id, json_extract(record, '$.state.checkpoint.n') AS n FROM tasks ORDER BY id");
    expect(rows).toEqual([
      { id: 1, n: 2 },
      { id: 2, n: 2 },
    ]);
    await db.close();
  });
  it("0058 S11 (0042's ABA): a copy rebuilt under its writer and followed back to the same position under a newer epoch refuses the writer's stale continuation", async () => {
    // The object's history: position 1 under epoch 1, then it took over at 2 (epoch 2) and wrote 3.
    const objectDb = await openSqliteDatabase({ vfs: "memory" });
    const object = await SqliteStorage.open(objectDb, "object");
    await object.load();
    await object.apply(stepped(1, 1, 1, 1));
    await object.apply(stepped(1, 2, 2, 2));
    const snapshot = (await object.readSnapshot())!;
    await object.apply(stepped(1, 3, 3, 2));
    const third = (await object.readLog(2, 1))[0]!;
    // The tab's database: `first` wrote 1..3 under epoch 1 (it last stored the head 3, epoch 1) ...
    const db = await openSqliteDatabase({ vfs: "memory" });
    const first = await SqliteStorage.open(db, "first");
    const second = await SqliteStorage.open(db, "second");
    await first.load();
    for (let position = 1; position <= 3; position++) await first.apply(stepped(9, position, position, 1));
    // ... then another connection rebuilt the copy from the object's snapshot (head 2, epoch 2) and applied the
    // object's position 3: the last row is at 3 again, where first left it, but under epoch 2.
    await second.rebuild(snapshot);
    await second.apply(third);
    expect((await second.load()).log).toEqual({ epoch: 2, position: 3 });
    // first continues what it believes is its own head under its old epoch: refused, nothing written. Before, the
    // fast check compared only the last row's position and wrote position 4 under epoch 1 on top of epoch 2's history.
    await expect(first.apply(stepped(9, 4, 4, 1))).rejects.toThrow(StaleEpoch);
    expect((await second.readLog(0, 10)).map((logged) => [logged.fence.position, logged.fence.epoch])).toEqual([[3, 2]]);
    expect((await second.load()).log).toEqual({ epoch: 2, position: 3 });
    await db.close();
    await objectDb.close();
  });
});
