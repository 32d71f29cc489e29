import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { InvalidInput } from "../src/index.ts";
import { utf8Length, utf8Slices } from "../src/limits.ts";
import type { SqliteDatabase } from "../src/storage/sqlite/database.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { SCHEMA_VERSION } from "../src/storage/sqlite/schema.ts";
import { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { openSqliteDatabase } from "../src/storage/sqlite/wasm.ts";
import { emptyBatch } from "../src/testing/storage-conformance.ts";
import { asObjects } from "./sqlite-support.ts";

// Decision 0039: the log's tail keeps a fenced transaction of any size, in slices that each fit in one row of a
// storage whose rows are limited (a Durable Object's 2 MB): a takeover recovering 10,000 running tasks (2.15 MB) or
// a group of six 400 KB inputs is stored; before, the one tail row refused it (InvalidInput, maxRowBytes).

/** The same database with a row limit, as a Durable Object's is. */
const rowLimited = (db: SqliteDatabase, maxRowBytes: number) => asObjects(db, { maxRowBytes });

const inputs = (count: number, bytes: number) =>
  Array.from({ length: count }, (_, index) => ({
    id: index + 1,
    conversationId: 1,
    kind: "pi.user",
    payload: { text: "x".repeat(bytes), index },
    at: index,
  }));

describe("decision 0039: the log's tail under a row limit", () => {
  it("six 400 KB inputs in one fenced transaction (2.4 MB) are stored on a 2 MB-row storage; every tail row fits, the tail reads it whole", async () => {
    const raw = await openSqliteDatabase({ vfs: "memory" });
    const storage = await SqliteStorage.open(rowLimited(raw, 2_000_000), "limited");
    const entries = inputs(6, 400_000);
    await storage.apply({ ...emptyBatch(), fence: { epoch: 1, position: 1 }, entries });
    const [batch] = await storage.readLog(0, 10);
    expect(batch!.entries).toEqual(entries);
    const rows = await raw.all(
      "SELECT length(CAST(batch AS BLOB)) AS bytes FROM pi_durable_log UNION ALL SELECT length(CAST(text AS BLOB)) FROM pi_durable_log_parts",
    );
    expect(rows.length).toBe(2);
    for (const row of rows) expect(Number(row.bytes)).toBeLessThanOrEqual(2_000_000);
    await storage.trimLog(1);
    expect(await raw.all("SELECT * FROM pi_durable_log_parts")).toEqual([]);
  });

  it("a row of its own over the limit is still refused (InvalidInput, maxRowBytes), nothing written", async () => {
    const raw = await openSqliteDatabase({ vfs: "memory" });
    const storage = await SqliteStorage.open(rowLimited(raw, 2_000_000), "limited");
    const refusal = await storage
      .apply({ ...emptyBatch(), fence: { epoch: 1, position: 1 }, entries: inputs(1, 2_100_000) })
      .catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(InvalidInput);
    expect(refusal).toMatchObject({ limit: "maxRowBytes" });
    expect((await storage.load()).log).toBeUndefined();
    expect(await storage.readLog(0, 10)).toEqual([]);
  });

  it("S11: a version-3 database (one tail row per transaction) opens at the current version with its tail intact; read-only it reads the tail unmodified", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    await storage.apply({ ...emptyBatch(), fence: { epoch: 1, position: 1 }, entries: inputs(1, 10) });
    await storage.database.exec(
      "DROP TABLE pi_durable_log_parts; DROP TABLE pi_durable_forks; UPDATE pi_durable_meta SET value = '3' WHERE key = 'schema_version';",
    );
    const v3 = await storage.exportImage();
    const readOnly = await openSqliteStorage({ vfs: "memory", image: v3, readOnly: true });
    expect((await readOnly.readLog(0, 10)).map((batch) => batch.fence)).toEqual([{ epoch: 1, position: 1 }]);
    expect(await readOnly.exportImage()).toEqual(v3);
    const writable = await openSqliteStorage({ vfs: "memory", image: v3 });
    expect(await writable.database.get("SELECT value FROM pi_durable_meta WHERE key = 'schema_version'")).toEqual({
      value: String(SCHEMA_VERSION),
    });
    expect((await writable.readLog(0, 10)).map((batch) => batch.entries.length)).toEqual([1]);
    await writable.apply({ ...emptyBatch(), fence: { epoch: 1, position: 2 }, entries: inputs(1, 10).map((e) => ({ ...e, id: 2 })) });
    expect((await writable.readLog(0, 10)).map((batch) => batch.fence.position)).toEqual([1, 2]);
  });

  it("utf8Slices: every slice fits, the slices join to the text, a surrogate pair is never cut (fast-check)", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 400 }), fc.integer({ min: 4, max: 64 }), (text, max) => {
        const slices = utf8Slices(text, max);
        expect(slices.join("")).toBe(text);
        for (const slice of slices) expect(utf8Length(slice)).toBeLessThanOrEqual(max);
        for (let index = 1; index < slices.length; index++) {
          const cut = /[\ud800-\udbff]$/.test(slices[index - 1]!) && /^[\udc00-\udfff]/.test(slices[index]!);
          expect(cut).toBe(false);
        }
      }),
      { numRuns: 300 },
    );
  });
});
