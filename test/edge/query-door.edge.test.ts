/**
 * The read-only door on a Durable Object (`storage.query()` over `ctx.storage.sql`, issue 21 R3/R10, issue 22
 * item 7): the same attacks as test/query-door.test.ts, in workerd. A refused statement leaves the object's
 * settings and rows as they were, an accepted one too; SQL errors are SQLite's; a query stops at its row and
 * byte caps.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { emptyBatch, sampleTask } from "../../src/testing/storage-conformance.ts";
import { answerAllowed, BROKEN, doorCase, LONG_SELECT, READS, rowsMatch, SETTING_ATTACKS, WRITE_ATTACKS } from "../query-door-cases.ts";
import { type Edge, startEdge } from "./support.ts";

let edge: Edge;
beforeAll(async () => {
  edge = await startEdge();
}, 120_000);
afterAll(() => edge?.dispose());

const post = (body: unknown): RequestInit => ({ method: "POST", body: JSON.stringify(body) });

interface Answer {
  rows?: Array<Record<string, unknown>>;
  error?: string;
  message?: string;
}
interface Door {
  before: string;
  answers: Array<{ answer: Answer; state: string }>;
}

/** Runs `sqls` through storage.query() in the object `name` (seeded with two tasks on first use). */
async function door(name: string, sqls: string[], queryLimits?: Record<string, number>): Promise<Door> {
  await edge.json("conformance", name, "/apply", post({ ...emptyBatch(), tasks: [sampleTask(2, "pending"), sampleTask(3, "running")] }));
  return edge.json<Door>("conformance", name, "/door", post({ sqls, queryLimits }));
}

describe("B10 on a Durable Object: the door decides without changing the object (issue 21 R3, R10)", () => {
  it("R3: EXPLAIN PRAGMA case_sensitive_like = 1 and EXPLAIN PRAGMA reverse_unordered_selects = 1 are refused and change nothing", async () => {
    const result = await door("r3", [
      "EXPLAIN PRAGMA case_sensitive_like = 1",
      "SELECT 'a' LIKE 'A' AS x",
      "EXPLAIN PRAGMA reverse_unordered_selects = 1",
      "PRAGMA reverse_unordered_selects",
    ]);
    expect(result.answers.map((a) => a.answer.error ?? a.answer.rows)).toEqual([
      "QueryNotReadOnly",
      [{ x: 1 }],
      "QueryNotReadOnly",
      [{ reverse_unordered_selects: 0 }],
    ]);
    for (const { state } of result.answers) expect(state).toBe(result.before);
  });

  it("every spelling of a setting PRAGMA and every statement that writes is refused; settings and rows stay; writes still work", async () => {
    const result = await door("attacks", [...SETTING_ATTACKS, ...WRITE_ATTACKS]);
    const sqls = [...SETTING_ATTACKS, ...WRITE_ATTACKS];
    result.answers.forEach(({ answer, state }, i) => {
      expect(["QueryNotReadOnly", "QueryFailed"], sqls[i]).toContain(answer.error);
      expect(state, sqls[i]).toBe(result.before);
    });
    // The setting PRAGMAs are refusals, not failures: the object never compiled them.
    SETTING_ATTACKS.forEach((sql, i) => {
      expect(result.answers[i]!.answer.error, sql).toBe("QueryNotReadOnly");
    });
    await edge.json("conformance", "attacks", "/apply", post({ ...emptyBatch(), tasks: [sampleTask(4, "pending")] }));
    const after = await door("attacks", ["SELECT count(*) AS n FROM tasks"]);
    expect(after.answers[0]!.answer.rows).toEqual([{ n: 3 }]);
  });

  it("R10: SELECT ';', literals holding 'pragma', comments and a long SELECT pass; a typo is QueryFailed with SQLite's words", async () => {
    const result = await door("reads", [
      ...READS.map(([sql]) => sql),
      LONG_SELECT,
      "SELECT no_such_column FROM tasks",
      `SELECT length('${"x".repeat(100_000)}') AS n`,
      ...BROKEN.map(([sql]) => sql),
    ]);
    READS.forEach(([sql, rows], i) => {
      expect(result.answers[i]!.answer.error, sql).toBeUndefined();
      expect(rowsMatch(result.answers[i]!.answer.rows!, rows), sql).toBe(true);
    });
    const [long, typo, tooLong] = result.answers.slice(READS.length).map((a) => a.answer);
    expect(long!.rows).toEqual([{ n: 60_000 }]);
    expect(typo).toMatchObject({ error: "QueryFailed", message: expect.stringMatching(/no such column: no_such_column/) });
    expect(tooLong).toMatchObject({ error: "QueryFailed", message: expect.stringMatching(/too long/) });
    BROKEN.forEach(([sql, words], i) => {
      expect(result.answers[READS.length + 3 + i]!.answer, sql).toMatchObject({
        error: "QueryFailed",
        message: expect.stringMatching(words),
      });
    });
    for (const { state } of result.answers) expect(state).toBe(result.before);
  });

  it("property: generated PRAGMAs in every spelling, statements of every kind and tricky reads change no setting and no row", async () => {
    let round = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(doorCase, { minLength: 1, maxLength: 10 }), async (cases) => {
        const result = await door(
          `property-${round++ % 3}`,
          cases.map((c) => c.sql),
        );
        cases.forEach((c, i) => {
          const { answer, state } = result.answers[i]!;
          if (!answerAllowed(c, answer)) throw new Error(`${JSON.stringify(c.sql)} answered ${JSON.stringify(answer)}`);
          expect(state, c.sql).toBe(result.before);
        });
      }),
      { numRuns: 30 },
    );
  }, 120_000);
});

describe("issue 22 item 7: a query from a page on an object returns a bounded number of rows and bytes", () => {
  it("a 20 M-row recursive CTE stops at the row cap (QueryLimitExceeded maxRows), and the object answers at once afterwards", async () => {
    const result = await door("cte", [
      "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 20000000) SELECT x FROM c",
      "SELECT count(*) AS n FROM tasks",
    ]);
    expect(result.answers[0]!.answer).toMatchObject({ error: "QueryLimitExceeded" });
    expect(result.answers[1]!.answer.rows).toEqual([{ n: 2 }]);
  });

  it("maxRows and maxBytes are configurable: up to the cap is answered whole, one past it is QueryLimitExceeded", async () => {
    const rows = (n: number) => `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT ${n}) SELECT x FROM c`;
    const result = await door("caps", [rows(50), rows(51), "SELECT zeroblob(900) AS b", "SELECT zeroblob(1001) AS b"], {
      maxRows: 50,
      maxBytes: 1000,
    });
    const answers = result.answers.map((a) => a.answer);
    expect(answers[0]!.rows).toHaveLength(50);
    expect(answers[1]).toMatchObject({ error: "QueryLimitExceeded", message: expect.stringMatching(/50 rows.*maxRows/) });
    expect(answers[2]!.rows).toHaveLength(1);
    expect(answers[3]).toMatchObject({ error: "QueryLimitExceeded", message: expect.stringMatching(/1000 bytes.*maxBytes/) });
  });

  it("an object's queryLimits reach its pages: POST /rpc query past maxRows or maxBytes is QueryLimitExceeded", async () => {
    const rpc = async (...args: unknown[]) =>
      (await edge.call("limited", "rpc", "/rpc", { method: "POST", body: JSON.stringify({ method: "query", args }) })).json();
    const rows = (n: number) => `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT ${n}) SELECT x FROM c`;
    expect(await rpc(rows(5))).toEqual({ value: [{ x: 1 }, { x: 2 }, { x: 3 }, { x: 4 }, { x: 5 }] });
    expect(await rpc(rows(6))).toMatchObject({ error: { name: "QueryLimitExceeded", details: { limit: "maxRows", value: 5 } } });
    expect(await rpc("SELECT zeroblob(2001) AS b")).toMatchObject({
      error: { name: "QueryLimitExceeded", details: { limit: "maxBytes" } },
    });
    expect(await rpc("PRAGMA foreign_keys = OFF")).toMatchObject({ error: { name: "QueryNotReadOnly" } });
  });
});
