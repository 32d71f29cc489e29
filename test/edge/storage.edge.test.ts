import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SEED_QUERY } from "../../examples/counter-task.ts";
import { emptyBatch, sampleTask, storageConformance } from "../../src/testing/storage-conformance.ts";
import { type Edge, startEdge } from "./support.ts";

let edge: Edge;
beforeAll(async () => {
  edge = await startEdge();
}, 120_000);
afterAll(() => edge?.dispose());

const post = (body: unknown): RequestInit => ({ method: "POST", body: JSON.stringify(body) });

describe("storage conformance inside a Durable Object (workerd)", () => {
  // The same cases as test/storage-conformance.test.ts; each runs in its own object, against its own SQLite.
  storageConformance({ create: () => undefined as never, exportsImage: false }).forEach((test, index) => {
    it(test.name, async () => {
      expect(await edge.json("conformance", `case-${index}`, `/case?index=${index}`)).toEqual({ ok: true });
    });
  });
});

describe("the SqliteDatabase facade over ctx.storage.sql", () => {
  it("S11: the seed's query runs unchanged on the tasks table of an object", async () => {
    await edge.json(
      "conformance",
      "seed-query",
      "/apply",
      post({ ...emptyBatch(), tasks: [sampleTask(7, "pending", { memos: { "printed-1": true } })] }),
    );
    const { rows } = await edge.json("conformance", "seed-query", "/query", post({ sql: SEED_QUERY }));
    expect(rows).toEqual([{ id: 7, status: "pending", n: 7, memos: '{"printed-1":true}', restarts: null }]);
  });

  it("storage.query() refuses statements that write — also a write hidden in a CTE — and leaves the data unchanged", async () => {
    await edge.json("conformance", "refusals", "/apply", post({ ...emptyBatch(), tasks: [sampleTask(2, "pending")] }));
    for (const sql of [
      "DELETE FROM tasks",
      "UPDATE tasks SET status = 'x'",
      "DROP TABLE tasks",
      "SELECT 1; DELETE FROM tasks",
      "PRAGMA user_version = 3",
      "WITH x AS (SELECT 1) DELETE FROM tasks",
      "WITH x AS (SELECT 1) DELETE FROM tasks WHERE id = -1", // writes no row, but is a write all the same
    ]) {
      const response = await edge.call("conformance", "refusals", "/query", post({ sql }));
      expect(response.status, sql).toBe(500);
      expect((await response.json()).name, sql).toBe("QueryNotReadOnly");
    }
    expect(
      (await edge.json("conformance", "refusals", "/query", post({ sql: "SELECT count(*) AS n FROM tasks WHERE id = ?", params: [2] })))
        .rows,
    ).toEqual([{ n: 1 }]);
    expect(
      (await edge.json("conformance", "refusals", "/query", post({ sql: "PRAGMA table_info(tasks)" }))).rows.map(
        (r: { name: string }) => r.name,
      ),
    ).toEqual(["id", "conversation_id", "kind", "status", "record"]);
    // Writes still work afterwards: the guard was switched off again.
    await edge.json("conformance", "refusals", "/apply", post({ ...emptyBatch(), tasks: [sampleTask(3, "pending")] }));
    expect((await edge.json("conformance", "refusals", "/query", post({ sql: "SELECT count(*) AS n FROM tasks" }))).rows).toEqual([
      { n: 2 },
    ]);
  });

  it("changed-row counts are rows, not the cursor's written index entries; transactions roll back; values convert", async () => {
    const results = await edge.json(
      "conformance",
      "facade",
      "/database",
      post([
        ["exec", "CREATE TABLE t (id INTEGER PRIMARY KEY, status TEXT, body BLOB); CREATE INDEX t_status ON t (status)"],
        ["run", "INSERT INTO t (id, status) VALUES (1, 'a'), (2, 'a')"],
        ["run", "UPDATE t SET status = 'b' WHERE id = 1"],
        ["run", "UPDATE t SET status = 'b' WHERE id = 99"],
        ["run", "UPDATE t SET body = ? WHERE id = 2", { bytes: [1, 2, 255] }],
        ["get", "SELECT body, typeof(body) AS type FROM t WHERE id = 2"],
        ["all", "SELECT ? AS n", "42n"],
        ["all", "SELECT ? AS n", "9007199254740993n"],
        ["all", "SELECT 1e20 AS x, typeof(1e20) AS type"],
        ["exec", "BEGIN"],
      ]),
    );
    expect(results.slice(1, 6)).toEqual([
      { ok: 2 },
      { ok: 1 },
      { ok: 0 },
      { ok: 1 },
      { ok: { body: { bytes: [1, 2, 255] }, type: "blob" } },
    ]);
    expect(results[6]).toEqual({ ok: [{ n: 42 }] });
    expect(results[7]).toMatchObject({ error: "RangeError", message: expect.stringMatching(/outside ±2\^53.*TEXT/) });
    expect(results[8]).toEqual({ ok: [{ x: 1e20, type: "real" }] }); // a large REAL reads back (it was refused as an integer)
    expect(results[9]).toMatchObject({ message: expect.stringMatching(/transactionSync/) }); // the object's own refusal
  });

  it("a database opened readOnly refuses every write with ReadOnlySession and still reads", async () => {
    await edge.json(
      "conformance",
      "read-only",
      "/database",
      post([
        ["exec", "CREATE TABLE t (n INTEGER)"],
        ["run", "INSERT INTO t VALUES (1)"],
      ]),
    );
    const results = await edge.json(
      "conformance",
      "read-only",
      "/database?readOnly",
      post([
        ["run", "INSERT INTO t VALUES (2)"],
        ["exec", "DROP TABLE t"],
        ["all", "SELECT n FROM t"],
      ]),
    );
    expect(results).toEqual([
      { error: "ReadOnlySession", message: expect.any(String) },
      { error: "ReadOnlySession", message: expect.any(String) },
      { ok: [{ n: 1 }] },
    ]);
  });
});
