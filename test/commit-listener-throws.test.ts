/**
 * Decision 0147 (issue 27, left by 0140's review): `Harness.onCommit`'s listeners run on the commit line. One that
 * throws (an app's, a host's, or a later bug in the object's alarm, the copy service or a following tab's writes) must
 * neither refuse a commit that was stored nor keep the listeners after it from hearing it; what it threw goes to the
 * harness's `onReport` as `{ kind: "error" }` (S7), not nowhere. Before, the first throw skipped every later listener
 * and the stored commit rejected with the listener's error. Each case puts a throwing listener before the part's own.
 */
import { describe, expect, it } from "vitest";
import { counterTask } from "../examples/counter-task.ts";
import { followingWrites } from "../src/browser/follow-writes.ts";
import { ObjectAlarm } from "../src/cloudflare/alarm.ts";
import { ObjectClock } from "../src/cloudflare/object-clock.ts";
import type { DurableObjectStorage } from "../src/cloudflare/types.ts";
import { createRegistry, defineExtension, Harness, MemoryStorage, type Report } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { answer, ScriptedModels } from "./agent-support.ts";
import { agentOptions, openCopyWorld } from "./copy-world-support.ts";
import { oneCopy } from "./follow-copy-world.ts";
import { ctx, flush, runUntil } from "./support.ts";

const broken = new Error("a commit listener is broken");
const throwing = () => {
  throw broken;
};
const errors = (reports: Report[]) => reports.filter((report) => report.kind === "error").map((report) => report.error);

describe("a commit listener that throws stops neither the commit nor the other listeners; it is reported (decision 0147)", () => {
  it("0147, S7: the first of two listeners throws, a third rejects: the commit resolves, the second hears every commit, onReport gets each listener's failure as an error report (once until it is heard well again: 0147's review, M1)", async () => {
    const reports: Report[] = [];
    const harness = await Harness.open(
      new MemoryStorage(),
      { registry: createRegistry(), onReport: (report) => void reports.push(report) },
      ctx,
    );
    harness.onCommit(throwing);
    const heard: number[] = [];
    harness.onCommit(({ batch }) => void heard.push(batch.conversations.length));
    harness.onCommit(() => Promise.reject(broken));
    await expect(harness.root(ctx)).resolves.toBeDefined();
    await harness.createConversation({}, ctx);
    await flush(1);
    expect(heard).toEqual([1, 1]);
    expect(errors(reports)).toEqual([broken, broken]);
    await harness.close(ctx);
  });

  it("0147: the object's alarm (src/cloudflare/alarm.ts) is set after a commit whose earlier listener threw, and the commit resolves", async () => {
    const clock = new ObjectClock(createManualClock(1_000_000));
    const registry = createRegistry().install(defineExtension({ name: "example", tasks: [counterTask(() => {})] }));
    const reports: Report[] = [];
    const harness = await Harness.open(new MemoryStorage(), { registry, clock, onReport: (report) => void reports.push(report) }, ctx);
    let at: number | null = null;
    const storage = {
      getAlarm: async () => at,
      setAlarm: async (time: number | Date) => void (at = Number(time)),
      deleteAlarm: async () => void (at = null),
    } as unknown as DurableObjectStorage;
    harness.onCommit(throwing);
    await new ObjectAlarm(storage, 30_000, clock).attach(harness);
    const root = await harness.root(ctx);
    await root.commit(
      (tx) =>
        tx.createTask(
          counterTask(() => {}),
          { to: 3 },
        ),
      ctx,
    );
    await flush(2);
    expect(at).toBe(1_000_000 + 30_000); // a pending task: the heartbeat
    expect(errors(reports)).toEqual([broken]);
    await harness.close(ctx);
  });

  it("0147: the alarm's own work off the commit line: a refused setAlarm is reported (not an unhandled rejection), and the next commit sets the alarm again (before, the object took it for set)", async () => {
    const clock = new ObjectClock(createManualClock(1_000_000));
    const registry = createRegistry().install(defineExtension({ name: "example", tasks: [counterTask(() => {})] }));
    const harness = await Harness.open(new MemoryStorage(), { registry, clock }, ctx);
    let at: number | null = null;
    let refuse = true;
    const refusal = new Error("setAlarm refused");
    const storage = {
      getAlarm: async () => at,
      setAlarm: async (time: number | Date) => {
        if (refuse) throw refusal;
        at = Number(time);
      },
      deleteAlarm: async () => void (at = null),
    } as unknown as DurableObjectStorage;
    const failures: unknown[] = [];
    await new ObjectAlarm(storage, 30_000, clock, (error) => failures.push(error)).attach(harness);
    const root = await harness.root(ctx);
    await root.commit(
      (tx) =>
        tx.createTask(
          counterTask(() => {}),
          { to: 3 },
        ),
      ctx,
    );
    await flush(2);
    expect(failures).toEqual([refusal]);
    expect(at).toBe(null);
    refuse = false;
    await root.commit(
      (tx) =>
        tx.createTask(
          counterTask(() => {}),
          { to: 3 },
        ),
      ctx,
    );
    await flush(2);
    expect(at).toBe(1_000_000 + 30_000);
    expect(failures).toEqual([refusal]);
    await harness.close(ctx);
  });

  it("0147: the copy service (src/follow/copy-service.ts) answers a device's forwarded submit once the copy holds it, though an earlier listener of the copy throws; the pushes the copy follows are not refused", async () => {
    const models = new ScriptedModels([answer("hello")]);
    const w = await openCopyWorld({ tab: new MemoryStorage(), copy: new MemoryStorage() }, agentOptions(models), undefined, (copy) =>
      copy.onCommit(throwing),
    );
    // The copy's harness reports to its host, which sends each report (an error as its shape) to the service's listeners.
    const reports: Report[] = [];
    await w.copy.service.onReport((report) => void reports.push(report));
    const root = await w.tab.root(ctx, { agent: { model: "faux/faux-1" } });
    await w.caughtUp();
    let answered: number | undefined;
    void w.device.submit(root.id, { type: "input", content: "hi", requestId: "r" }).then((id) => (answered = id));
    await runUntil(w.clock, () => answered !== undefined, 50);
    expect(await w.copyStorage.getSubmission(answered!)).toBeDefined();
    await w.caughtUp();
    expect(errors(reports).length).toBeGreaterThan(0);
    expect(errors(reports)).toContainEqual(expect.objectContaining({ message: broken.message }));
  });

  it("0147: a following tab's abort through the object (src/browser/follow-writes.ts) is answered when its copy shows the run ended, not after ARRIVAL_WAIT_MS, though an earlier listener of the copy throws", async () => {
    const clock = createManualClock(1_000);
    const models = new ScriptedModels([{ hang: "thinking" }]);
    const reports: Report[] = [];
    const copy = await Harness.open(
      new MemoryStorage(),
      { ...agentOptions(models), clock, resume: true, onReport: (report) => void reports.push(report) },
      ctx,
    );
    const root = await copy.root(ctx, { agent: { model: "faux/faux-1" } });
    await root.submit({ type: "input", content: "hi" }, ctx);
    await runUntil(clock, () => models.hanging === 1);
    copy.onCommit(throwing);
    const writes = followingWrites(async () => ({}), oneCopy(copy), clock);
    let answered = false;
    void writes.abortConversation(root.id).then(() => (answered = true));
    await flush(5);
    expect(answered).toBe(false);
    await root.abort(ctx); // the holder's abort, as it arrives in this copy
    await flush(5);
    expect(answered).toBe(true);
    expect(errors(reports).length).toBeGreaterThan(0);
    await copy.close(ctx);
  });
});
