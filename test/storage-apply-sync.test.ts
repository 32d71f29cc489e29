import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { TaskRecord } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { emptyBatch as empty, sampleTask as task } from "../src/testing/storage-conformance.ts";

// Decision 0124: SqliteStorage.apply is no async function (a `then` on its transaction). It must still answer every
// refusal with a rejected promise, never a throw, and its cache of spliced texts must never run ahead of the file.

const frozen = (record: TaskRecord): TaskRecord => Object.freeze({ ...record, state: Object.freeze(record.state) });

describe("SqliteStorage.apply without an async frame (issue 25)", () => {
  it("S11: a batch that is not JSON, and a read-only open's write, reject (never throw) and write nothing", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    await storage.apply({ ...empty(), tasks: [task(2, "running")] });
    const bad = { ...task(2, "running"), input: 1n as unknown as null };
    let answered: Promise<unknown> | undefined;
    expect(() => {
      answered = storage.apply({ ...empty(), tasks: [bad] });
    }).not.toThrow();
    await expect(answered).rejects.toThrow();
    expect(await storage.getTask(2)).toEqual(task(2, "running"));
    const image = await storage.exportImage();
    const viewer = await openSqliteStorage({ vfs: "memory", image, readOnly: true });
    let refused: Promise<unknown> | undefined;
    expect(() => {
      refused = viewer.apply({ ...empty(), tasks: [task(3, "pending")] });
    }).not.toThrow();
    await expect(refused).rejects.toThrow();
    await viewer.close();
    await storage.close();
  });

  it("S11: a batch the recount check cannot read (none, a recount whose task has no state, a throwing getter) rejects, never throws (review of 0124)", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    await storage.apply({ ...empty(), tasks: [task(2, "running")] });
    const hostile = [
      undefined,
      { ...empty(), recount: true, tasks: [{ ...task(2, "running"), state: undefined }] },
      Object.defineProperty({ ...empty(), tasks: [task(2, "running")] }, "recount", {
        get() {
          throw new Error("a hostile getter");
        },
        enumerable: true,
      }),
    ];
    for (const batch of hostile) {
      let answered: Promise<unknown> | undefined;
      expect(() => {
        answered = storage.apply(batch as never);
      }).not.toThrow();
      await expect(answered).rejects.toBeDefined();
    }
    expect(await storage.getTask(2)).toEqual(task(2, "running"));
    await storage.close();
  });

  it("S3/S11: random steps, some refused, leave each row the JSON of the last stored record, byte for byte (property)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(fc.nat(50), fc.boolean()), { minLength: 1, maxLength: 12 }), async (steps) => {
        const storage = await openSqliteStorage({ vfs: "memory" });
        let stored = frozen(task(2, "running"));
        await storage.apply({ ...empty(), tasks: [stored] });
        for (const [n, refuse] of steps) {
          const checkpoint = refuse ? { phase: "p", n, bad: 1n } : { phase: "p", n };
          const next = frozen({ ...stored, state: { status: "running", checkpoint: checkpoint as unknown as { phase: string } } });
          if (refuse) await expect(storage.apply({ ...empty(), tasks: [next] })).rejects.toThrow();
          else {
            await storage.apply({ ...empty(), tasks: [next] });
            stored = next;
          }
          const rows = await storage.query("SELECT record FROM tasks WHERE id = 2");
          expect(rows[0]?.record).toBe(JSON.stringify(stored));
        }
        await storage.close();
      }),
      { numRuns: 40 },
    );
  });
});
