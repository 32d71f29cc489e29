import { describe, expect, it } from "vitest";
import { type ConversationRecord, DEFAULT_SETTINGS, MemoryStorage, type TaskRecord } from "../src/index.ts";
import { Session } from "../src/session/session.ts";
import { isStorageFailure } from "../src/session/storage-failure.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { flush, holdApplies } from "./support.ts";

/** A MemoryStorage whose transactions can be held in flight, so that the commits queued behind one form a group. */
function holding(options: { maxRowBytes?: number } = {}): MemoryStorage & { hold(): () => void } {
  return holdApplies(new MemoryStorage(options));
}

describe("group commit (decision 0026): a commit of a group cannot reach into another one's writes", () => {
  it("S3: a later commit that mutates the record an earlier commit of its group staged fails as it would alone, and the earlier commit is stored as it wrote it", async () => {
    const storage = holding();
    const s = await Session.open(storage, createManualClock(1_000), false, DEFAULT_SETTINGS.limits);
    const conversationId = await s.commit((tx) => tx.createConversation());
    const id = await s.commit((tx) => {
      const taskId = tx.mintId();
      tx.putTask({
        id: taskId,
        conversationId,
        kind: "test.kind",
        version: 1,
        input: {},
        background: false,
        abortRequested: false,
        state: { status: "running", checkpoint: { phase: "a" } },
      });
      return taskId;
    });
    // Alone, the committed record a callback reads is frozen: writing into it throws and the commit fails.
    await expect(
      s.commit((tx) => {
        (tx.task(id) as { memos?: unknown }).memos = { a: 99 };
      }),
    ).rejects.toThrow(TypeError);

    const release = storage.hold();
    const lead = s.commit((tx) => tx.setDocument("test", "lead", 1), undefined, { group: true });
    await flush(1);
    const memo = s.commit(
      (tx) => {
        const current = tx.task(id)!;
        tx.putTask({ ...current, memos: { a: 1 } });
      },
      undefined,
      { group: true },
    );
    const meddling = s.commit(
      (tx) => {
        const current = tx.task(id)! as TaskRecord & { memos: Record<string, unknown> };
        current.memos.a = 99; // the record the memo commit staged, seen through this commit's overlay
        current.memos.b = 2;
      },
      undefined,
      { group: true },
    );
    release();
    await lead;
    await memo;
    await expect(meddling).rejects.toThrow(TypeError);
    expect((await storage.getTask(id))?.memos).toEqual({ a: 1 });
    expect(s.live.get(id)?.memos).toEqual({ a: 1 });
  });

  it("S3/B9: a commit storage cannot take (a value that is not JSON) fails alone: the other commits of every group it joins are stored", async () => {
    const storage = holding();
    const s = await Session.open(storage, createManualClock(1_000), false, DEFAULT_SETTINGS.limits);
    // A raw record write (setDocument now refuses a BigInt itself, as InvalidInput: decision 0022), so that
    // it is storage that cannot take it.
    const poison = (tx: Parameters<Parameters<Session["commit"]>[0]>[0]) =>
      tx.putConversation({ id: 10_000, createdAt: 0, poison: 1n } as unknown as ConversationRecord);
    const counter = (tx: Parameters<Parameters<Session["commit"]>[0]>[0]) => {
      const next = ((tx.document("test", "counter") as number | undefined) ?? 0) + 1;
      tx.setDocument("test", "counter", next);
      return next;
    };
    // Twice: the poisoned commit is retried by its caller and joins the next group too.
    for (const round of [1, 2]) {
      const release = storage.hold();
      const lead = s.commit((tx) => tx.setDocument("test", "lead", round), undefined, { group: true });
      await flush(1);
      const before = s.commit(counter, undefined, { group: true });
      const bad = s.commit(poison, undefined, { group: true });
      const after = s.commit(counter, undefined, { group: true });
      release();
      await lead;
      await expect(bad).rejects.toThrow(TypeError);
      expect([await before, await after]).toEqual([2 * round - 1, 2 * round]);
      expect(await storage.getDocument("test", "counter")).toBe(2 * round);
    }
    expect(await storage.getConversation(10_000)).toBeUndefined();
  });

  it("S3/R9: a commit whose row is larger than storage holds (Storage.maxRowBytes) fails alone with InvalidInput, not as a storage failure; the rest of its group is stored", async () => {
    const storage = holding({ maxRowBytes: 2000 });
    const s = await Session.open(storage, createManualClock(1_000), false, { maxDepth: 64, maxBytes: 2000 });
    const release = storage.hold();
    const lead = s.commit((tx) => tx.setDocument("test", "lead", 1), undefined, { group: true });
    await flush(1);
    const before = s.commit((tx) => tx.setDocument("test", "before", 1), undefined, { group: true });
    // The value is within maxBytes (1,992 bytes as JSON); its row holds it with its scope and key: over 2,000.
    const large = s.commit((tx) => tx.setDocument("test", "large", "x".repeat(1990)), undefined, { group: true });
    const after = s.commit((tx) => tx.setDocument("test", "after", 2), undefined, { group: true });
    release();
    await lead;
    const refused = await large.catch((error: unknown) => error);
    expect(refused).toMatchObject({ name: "InvalidInput", limit: "maxRowBytes" });
    expect(isStorageFailure(refused)).toBe(false); // a runtime's commitStored would retry a storage failure for ever
    await before;
    await after;
    expect([await storage.getDocument("test", "before"), await storage.getDocument("test", "after")]).toEqual([1, 2]);
    expect(await storage.getDocument("test", "large")).toBeUndefined();
    expect([...s.documents.values()].some((d) => d.key === "large")).toBe(false); // nor in the mirror
  });

  it("S3: a commit that failed only on what a refused commit of its group staged is decided again without it", async () => {
    const storage = holding();
    const s = await Session.open(storage, createManualClock(1_000), false, DEFAULT_SETTINGS.limits);
    const release = storage.hold();
    const lead = s.commit((tx) => tx.setDocument("test", "lead", 1), undefined, { group: true });
    await flush(1);
    // The first stages a claim (and a value storage refuses); the second refuses to run once the claim is there.
    const claim = s.commit(
      (tx) => {
        tx.setDocument("test", "claim", "first");
        tx.putConversation({ id: 10_000, createdAt: 0, poison: 1n } as unknown as ConversationRecord);
      },
      undefined,
      { group: true },
    );
    const second = s.commit(
      (tx) => {
        if (tx.document("test", "claim") !== undefined) throw new Error("claimed already");
        tx.setDocument("test", "claim", "second");
        return "second";
      },
      undefined,
      { group: true },
    );
    release();
    await lead;
    await expect(claim).rejects.toThrow(TypeError);
    // Alone after the refused claim, the second finds no claim: it is stored.
    expect(await second).toBe("second");
    expect(await storage.getDocument("test", "claim")).toBe("second");
  });
});
