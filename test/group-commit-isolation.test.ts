import { describe, expect, it } from "vitest";
import { type Batch, MemoryStorage, type TaskRecord } from "../src/index.ts";
import { Session } from "../src/session/session.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { flush } from "./support.ts";

/** A MemoryStorage whose transactions can be held in flight, so that the commits queued behind one form a group. */
function holding(): MemoryStorage & { hold(): () => void } {
  const storage = new MemoryStorage() as MemoryStorage & { hold(): () => void };
  const apply = storage.apply.bind(storage);
  let gate: Promise<void> | undefined;
  storage.hold = () => {
    let open!: () => void;
    gate = new Promise<void>((resolve) => (open = resolve));
    return () => {
      gate = undefined;
      open();
    };
  };
  storage.apply = async (batch: Batch) => {
    if (gate) await gate;
    return apply(batch);
  };
  return storage;
}

describe("group commit (decision 0026): a commit of a group cannot reach into another one's writes", () => {
  it("S3: a later commit that mutates the record an earlier commit of its group staged fails as it would alone, and the earlier commit is stored as it wrote it", async () => {
    const storage = holding();
    const s = await Session.open(storage, createManualClock(1_000), false);
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
});
