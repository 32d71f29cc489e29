import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type Batch, DEFAULT_SETTINGS, HarnessClosed, MemoryStorage } from "../src/index.ts";
import { CommitRecord } from "../src/session/commit-record.ts";
import { documentKey } from "../src/session/keys.ts";
import { Session } from "../src/session/session.ts";
import type { KernelTx } from "../src/session/tx.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { flush, holdApplies } from "./support.ts";

/** A MemoryStorage that can hold its transactions in flight and refuses any batch writing a document named "refused". */
function storageUnderTest(): MemoryStorage & { hold(): () => void; stored: string[] } {
  const storage = new MemoryStorage() as MemoryStorage & { stored: string[] };
  const apply = storage.apply.bind(storage);
  storage.stored = [];
  storage.apply = async (batch: Batch) => {
    if (batch.documents.some((document) => document.key === "refused")) throw new Error("disk full");
    await apply(batch);
    for (const document of batch.documents) storage.stored.push(document.key);
  };
  // Held before the refusal and the record, as a transaction in flight.
  return holdApplies(storage);
}

/** Writes the document named `arg` and answers with it; "throws" fails in the callback. */
const body = (tx: KernelTx, arg: string) => {
  if (arg === "throws") throw new Error("refused by its own callback");
  tx.setDocument("test", arg, 1);
  return arg;
};

async function open() {
  const storage = storageUnderTest();
  const session = await Session.open(storage, createManualClock(1_000), false, DEFAULT_SETTINGS.limits);
  const record = new CommitRecord(body, undefined, { group: true });
  return { storage, session, record };
}

describe("one reusable commit record per invocation (decision 0077)", () => {
  it("S8: a second commit through a record still on the line gets a record of its own; each settles alone, once, with its own result", async () => {
    const { storage, session, record } = await open();
    const release = storage.hold();
    const lead = session.commit((tx) => tx.setDocument("test", "lead", 1), undefined, { group: true });
    await flush(1);
    const first = session.commitThrough<string>(record, "a");
    expect(record.busy).toBe(true);
    const second = session.commitThrough<string>(record, "b");
    const failing = session.commitThrough<string>(record, "throws");
    release();
    await lead;
    expect(await first).toBe("a");
    expect(await second).toBe("b");
    await expect(failing).rejects.toThrow("refused by its own callback");
    expect(record.busy).toBe(false);
    expect(record.arg).toBeUndefined(); // the change is not kept alive by a free record
    expect(await session.commitThrough<string>(record, "c")).toBe("c");
    expect(storage.stored).toEqual(["lead", "a", "b", "c"]);
  });

  it("S8/decision 0026: in a group storage refuses, the record's commit is decided again and stored once; the refused one fails alone", async () => {
    const { storage, session, record } = await open();
    const release = storage.hold();
    const lead = session.commit((tx) => tx.setDocument("test", "lead", 1), undefined, { group: true });
    await flush(1);
    const refused = session.commit((tx) => tx.setDocument("test", "refused", 1), undefined, { group: true });
    const mine = session.commitThrough<string>(record, "mine");
    release();
    await lead;
    await expect(refused).rejects.toThrow("disk full");
    expect(await mine).toBe("mine");
    expect(storage.stored.filter((key) => key === "mine")).toEqual(["mine"]);
    expect(record.busy).toBe(false);
  });

  it("a sealed session refuses a commit through a record and leaves the record free", async () => {
    const { session, record } = await open();
    await session.seal();
    await expect(session.commitThrough(record, "a")).rejects.toBeInstanceOf(HarnessClosed);
    expect(record.busy).toBe(false);
  });

  it("S8: any mix of commits through one record (in flight together, failing in their callback, refused by storage) settles each once with its own outcome, and stores each accepted one once", async () => {
    const step = fc.constantFrom("ok", "throws", "refused");
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(step, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 6 }), async (turns) => {
        const { storage, session, record } = await open();
        const expected: string[] = [];
        let n = 0;
        for (const turn of turns) {
          const release = storage.hold();
          const lead = session.commit((tx) => tx.setDocument("test", `lead${n}`, 1), undefined, { group: true });
          expected.push(`lead${n}`);
          await flush(1);
          const commits = turn.map((kind) => {
            const name = kind === "ok" ? `c${n++}` : kind;
            return { kind, name, promise: session.commitThrough<string>(record, name) };
          });
          release();
          await lead;
          for (const { kind, name, promise } of commits) {
            if (kind === "ok") {
              expect(await promise).toBe(name);
              expected.push(name);
            } else await expect(promise).rejects.toThrow(kind === "throws" ? "refused by its own callback" : "disk full");
          }
          expect(record.busy).toBe(false);
        }
        expect(storage.stored).toEqual(expected);
      }),
      { numRuns: 60 },
    );
  });
});

describe("a grouped commit's promise follows its group's end (decision 0087)", () => {
  it("S3/S8: it settles once the whole group is stored and published; until then its record stays busy, and a commit made meanwhile takes a record of its own", async () => {
    const { storage, session, record } = await open();
    const release = storage.hold();
    const lead = session.commit((tx) => tx.setDocument("test", "lead", 1), undefined, { group: true });
    await flush(1);
    const order: string[] = [];
    const first = session.commitThrough<string>(record, "a").then((result) => {
      order.push(`record ${result}`);
      return result;
    });
    let busyWhenOtherSettled: boolean | undefined;
    let second: Promise<string> | undefined;
    // Stored in the same transaction, after the record's commit: an ordinary commit settles in the group's loop.
    const other = session
      .commit((tx) => tx.setDocument("test", "other", 1), undefined, { group: true })
      .then(() => {
        order.push("other");
        // The group is durable and published, but the record's promise has not settled yet: the record is still
        // the first commit's, so this one goes with a record of its own (before decision 0087 it took the record).
        busyWhenOtherSettled = record.busy;
        expect(session.documents.get(documentKey("test", "a"))?.value).toBe(1);
        second = session.commitThrough<string>(record, "b");
      });
    release();
    await lead;
    await other;
    expect(await first).toBe("a");
    expect(await second).toBe("b");
    expect(busyWhenOtherSettled).toBe(true);
    expect(order).toEqual(["other", "record a"]);
    expect(storage.stored).toEqual(["lead", "a", "other", "b"]);
    expect(record.busy).toBe(false);
  });
});
