import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { deepFreeze } from "../src/base/json.ts";
import { DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH } from "../src/limits.ts";
import { GroupOverlay } from "../src/session/group.ts";
import { KernelTx, type TxSource } from "../src/session/tx.ts";
import { MemoryStorage } from "../src/storage/memory.ts";
import type { Batch, TaskRecord } from "../src/storage/records.ts";
import { LiveIndex } from "../src/tasks/live-index.ts";
import { taskRecord } from "./task-record.ts";

// Decision 0083: `hasLiveOwnedWork` stops at the first live child and walks the staged records without a
// generator. It must answer what `liveChildren(…).length > 0` answers — committed children and children staged
// by the commits before in the group or by this one, each live as the transaction sees it — on which a task's
// end (`completing` while owned work is live, S2/S3) and the abort cascade rest.

const IDS = [1, 2, 3, 4, 5, 6, 7, 8];
/** A task's version at one layer: absent, live (running) or terminal. */
const layer = fc.constantFrom("none" as const, "live" as const, "terminal" as const);
const task = fc.record({
  owner: fc.option(fc.constantFrom(...IDS), { nil: undefined }),
  background: fc.boolean(),
  committed: fc.constantFrom("none" as const, "live" as const), // the mirror holds live tasks only
  group: layer, // staged by a commit before in the group
  own: layer, // staged by this commit
});

function version(id: number, spec: { owner: number | undefined; background: boolean }, status: "live" | "terminal"): TaskRecord {
  const state: TaskRecord["state"] =
    status === "live"
      ? { status: "running", checkpoint: { phase: "p" } }
      : { status: "terminal", outcome: { status: "completed", result: null } };
  return deepFreeze(taskRecord(id, state, { ...(spec.owner === undefined ? {} : { owner: spec.owner }), background: spec.background }));
}

describe("hasLiveOwnedWork (decision 0083)", () => {
  it("S3: answers as liveChildren does, for children committed, staged by the group before, or staged by the commit itself", () => {
    fc.assert(
      fc.property(fc.array(task, { minLength: IDS.length, maxLength: IDS.length }), (specs) => {
        const live = new Map<number, TaskRecord>();
        const index = new LiveIndex();
        specs.forEach((spec, at) => {
          if (spec.committed === "none") return;
          const record = version(IDS[at]!, spec, "live");
          live.set(record.id, record);
          index.index(record);
        });
        const source: TxSource = {
          clock: { now: () => 0, setTimer: () => () => {} } as unknown as TxSource["clock"],
          storage: new MemoryStorage(),
          live,
          conversations: new Map(),
          documents: new Map(),
          openSubmissions: new Map(),
          nextId: 100,
          limits: { maxDepth: DEFAULT_MAX_DEPTH, maxBytes: DEFAULT_MAX_BYTES },
          handoverKeys: new Map(),
        };
        const group = new GroupOverlay(source);
        const before: TaskRecord[] = [];
        specs.forEach((spec, at) => {
          if (spec.group !== "none") before.push(version(IDS[at]!, spec, spec.group));
        });
        const empty = { conversations: [], entries: [], submissions: [], documents: [] };
        if (before.length > 0) group.stage({ ...empty, tasks: before } as Batch, (scope, key) => `${scope}/${key}`);
        const tx = new KernelTx(source, undefined, group);
        specs.forEach((spec, at) => {
          if (spec.own !== "none") tx.putTask(version(IDS[at]!, spec, spec.own));
        });
        for (const id of IDS) expect(index.hasLiveOwnedWork(tx, id)).toBe(index.liveChildren(tx, id).length > 0);
      }),
      { numRuns: 300 },
    );
  });
});
