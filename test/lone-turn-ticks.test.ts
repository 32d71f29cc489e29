import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type Batch, DEFAULT_SETTINGS, MemoryStorage, StorageQuotaExceeded } from "../src/index.ts";
import { CommitRecord } from "../src/session/commit-record.ts";
import { Session } from "../src/session/session.ts";
import { isStorageFailure } from "../src/session/storage-failure.ts";
import type { KernelTx } from "../src/session/tx.ts";
import { createManualClock } from "../src/testing/clock.ts";

// Decision 0126: a lone commit's turn is stored without an async frame (`CommitLine.store`). A speed-only change: this
// guards that a lone commit — stored, staging nothing, failing in its callback or its checks, refused by storage in
// any way it can be — still stores, refuses and settles exactly as before, in the same microtask ticks. `TICKS` is
// the trace the code before the change (ac1ab7a) gave, tick for tick.

const KINDS = ["write", "none", "throws", "promise", "check-pass", "check-fail", "after-commit-throws"] as const;
const APPLIES = ["ok", "reject", "throw", "thenable"] as const;
const THROUGH = ["commit", "record", "ungrouped"] as const;
type Kind = (typeof KINDS)[number];
type Apply = (typeof APPLIES)[number];
type Through = (typeof THROUGH)[number];

/** Counts microtasks: `now()` is how many of its own jobs ran before the caller's. */
function ticker() {
  let tick = 0;
  let on = true;
  const spin = () => {
    if (!on || tick > 500) return;
    tick++;
    queueMicrotask(spin);
  };
  queueMicrotask(spin);
  return { now: () => tick, stop: () => void (on = false) };
}

/** A MemoryStorage whose next `apply` goes as `mode` says; every call and settlement is traced. */
function tracedStorage() {
  const storage = new MemoryStorage() as MemoryStorage & { mode: Apply; trace(event: string): void };
  const apply = storage.apply.bind(storage);
  storage.mode = "ok";
  storage.trace = () => {};
  storage.apply = (batch: Batch) => {
    storage.trace("apply");
    const mode = storage.mode;
    storage.mode = "ok";
    if (mode === "throw") throw new StorageQuotaExceeded("quota (thrown)");
    if (mode === "reject") return Promise.reject(new StorageQuotaExceeded("quota (rejected)"));
    const applied = apply(batch);
    // A storage's own thenable (not a native promise): followed as `await` follows one.
    if (mode === "thenable")
      return {
        // biome-ignore lint/suspicious/noThenProperty: a storage's own thenable is what this case is about
        then: (ok: () => void, fail: (e: unknown) => void) =>
          applied.then(() => {
            storage.trace("applied");
            ok();
          }, fail),
      } as never;
    return applied.then(() => storage.trace("applied"));
  };
  return storage;
}

function body(kind: Kind, trace: (event: string) => void) {
  return (tx: KernelTx): unknown => {
    trace("body");
    if (kind === "throws") throw new Error("callback");
    if (kind === "promise") return Promise.resolve(1);
    if (kind === "check-pass" || kind === "check-fail")
      tx.check(async () => {
        trace("check");
        if (kind === "check-fail") throw new Error("check");
      });
    if (kind === "after-commit-throws")
      tx.afterCommit(() => {
        trace("afterCommit");
        throw new Error("afterCommit");
      });
    if (kind === "none") return "nothing";
    const next = ((tx.document("t", "n") as number | undefined) ?? 0) + 1;
    tx.setDocument("t", "n", next);
    return next;
  };
}

/** One lone commit on `session`, alone on its line: the trace of what happened at which tick, and its outcome. */
async function lone(session: Session, storage: ReturnType<typeof tracedStorage>, kind: Kind, apply: Apply, through: Through) {
  const events: string[] = [];
  const clock = ticker();
  const trace = (event: string) => events.push(`${event}@${clock.now()}`);
  storage.mode = apply;
  storage.trace = trace;
  const stopListening = session.subscribe(() => trace("published"));
  const settled = { stored: () => trace("settled:stored"), refused: () => trace("settled:refused") };
  let committed: Promise<unknown>;
  if (through === "record") {
    const record = new CommitRecord((tx: KernelTx) => body(kind, trace)(tx), undefined, { group: true, settled });
    committed = session.commitThrough(record, undefined);
  } else committed = session.commit(body(kind, trace), undefined, { group: through === "commit", settled });
  // The line's next turn: when the lone commit's turn let it start.
  const next = session.read(() => trace("next turn"));
  const outcome = await committed.then(
    (value) => `stored ${String(value)}`,
    (error: Error) => `refused ${error.name}${isStorageFailure(error) ? " (storage failure)" : ""}: ${error.message}`,
  );
  trace("settled");
  await next;
  clock.stop();
  stopListening();
  return { events: events.join(" "), outcome };
}

const open = async () => {
  const storage = tracedStorage();
  const session = await Session.open(storage, createManualClock(1_000), false, DEFAULT_SETTINGS.limits);
  return { storage, session };
};

describe("decision 0126: a lone commit's turn without an async frame stores, refuses and settles as before", () => {
  it("every kind of lone commit, through every way in, settles with the same outcome in the same ticks as before", async () => {
    const got: Record<string, string> = {};
    for (const through of THROUGH)
      for (const kind of KINDS)
        for (const apply of APPLIES) {
          const { storage, session } = await open();
          const { events, outcome } = await lone(session, storage, kind, apply, through);
          got[`${through} ${kind} ${apply}`] = `${outcome} | ${events}`;
        }
    if (process.env.PRINT_TICKS) console.log(JSON.stringify(got, null, 2));
    expect(got).toEqual(TICKS);
  });

  it("S8/S3: any sequence of lone commits, some refused, stores each accepted one once and settles each as alone (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.constantFrom(...KINDS), fc.constantFrom(...APPLIES), fc.constantFrom(...THROUGH)), {
          minLength: 1,
          maxLength: 12,
        }),
        async (commits) => {
          const { storage, session } = await open();
          let written = 0; // the counter as the model has it: a write lands when storage takes it, whatever follows
          for (const [kind, apply, through] of commits) {
            const { events, outcome } = await lone(session, storage, kind, apply, through);
            const lands =
              (kind === "write" || kind === "check-pass" || kind === "after-commit-throws") && (apply === "ok" || apply === "thenable");
            if (lands) written++;
            // The table's commit stored the counter's first value; this one stores the model's.
            expect(`${outcome} | ${events}`).toBe(TICKS[`${through} ${kind} ${apply}`]!.replace(/^stored 1 /, `stored ${written} `));
            expect(storedDocument(session)).toBe(written === 0 ? undefined : written);
            expect(await storage.getDocument("t", "n")).toBe(written === 0 ? undefined : written);
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});

/** The counter document as the mirror holds it, whatever its key's spelling. */
function storedDocument(session: Session): unknown {
  for (const document of session.documents.values()) if (document.scope === "t" && document.key === "n") return document.value;
  return undefined;
}

/** What each lone commit gave on the code before decision 0126 (ac1ab7a): outcome | event@tick, in order. */
const TICKS: Record<string, string> = {
  "commit write ok": "stored 1 | body@1 apply@1 applied@2 published@3 settled:stored@3 settled@5 next turn@7",
  "commit write reject":
    "refused StorageQuotaExceeded (storage failure): quota (rejected) | body@1 apply@1 settled:refused@2 settled@4 next turn@6",
  "commit write throw":
    "refused StorageQuotaExceeded (storage failure): quota (thrown) | body@1 apply@1 settled:refused@1 settled@3 next turn@5",
  "commit write thenable": "stored 1 | body@1 apply@1 applied@3 published@4 settled:stored@4 settled@6 next turn@8",
  "commit none ok": "stored nothing | body@1 settled:stored@1 settled@3 next turn@5",
  "commit none reject": "stored nothing | body@1 settled:stored@1 settled@3 next turn@5",
  "commit none throw": "stored nothing | body@1 settled:stored@1 settled@3 next turn@5",
  "commit none thenable": "stored nothing | body@1 settled:stored@1 settled@3 next turn@5",
  "commit throws ok": "refused Error: callback | body@1 settled:refused@1 settled@3 next turn@5",
  "commit throws reject": "refused Error: callback | body@1 settled:refused@1 settled@3 next turn@5",
  "commit throws throw": "refused Error: callback | body@1 settled:refused@1 settled@3 next turn@5",
  "commit throws thenable": "refused Error: callback | body@1 settled:refused@1 settled@3 next turn@5",
  "commit promise ok":
    "refused InvalidCommit: A commit callback returned a Promise: it must be synchronous. Do the async work before the commit and stage only writes in it. | body@1 settled:refused@1 settled@3 next turn@5",
  "commit promise reject":
    "refused InvalidCommit: A commit callback returned a Promise: it must be synchronous. Do the async work before the commit and stage only writes in it. | body@1 settled:refused@1 settled@3 next turn@5",
  "commit promise throw":
    "refused InvalidCommit: A commit callback returned a Promise: it must be synchronous. Do the async work before the commit and stage only writes in it. | body@1 settled:refused@1 settled@3 next turn@5",
  "commit promise thenable":
    "refused InvalidCommit: A commit callback returned a Promise: it must be synchronous. Do the async work before the commit and stage only writes in it. | body@1 settled:refused@1 settled@3 next turn@5",
  "commit check-pass ok": "stored 1 | body@1 check@1 apply@3 applied@4 published@5 settled:stored@5 settled@7 next turn@9",
  "commit check-pass reject":
    "refused StorageQuotaExceeded (storage failure): quota (rejected) | body@1 check@1 apply@3 settled:refused@4 settled@6 next turn@8",
  "commit check-pass throw":
    "refused StorageQuotaExceeded (storage failure): quota (thrown) | body@1 check@1 apply@3 settled:refused@3 settled@5 next turn@7",
  "commit check-pass thenable": "stored 1 | body@1 check@1 apply@3 applied@5 published@6 settled:stored@6 settled@8 next turn@10",
  "commit check-fail ok": "refused Error: check | body@1 check@1 settled:refused@3 settled@5 next turn@7",
  "commit check-fail reject": "refused Error: check | body@1 check@1 settled:refused@3 settled@5 next turn@7",
  "commit check-fail throw": "refused Error: check | body@1 check@1 settled:refused@3 settled@5 next turn@7",
  "commit check-fail thenable": "refused Error: check | body@1 check@1 settled:refused@3 settled@5 next turn@7",
  "commit after-commit-throws ok":
    "refused Error: afterCommit | body@1 apply@1 applied@2 published@3 afterCommit@3 settled:refused@3 settled@5 next turn@7",
  "commit after-commit-throws reject":
    "refused StorageQuotaExceeded (storage failure): quota (rejected) | body@1 apply@1 settled:refused@2 settled@4 next turn@6",
  "commit after-commit-throws throw":
    "refused StorageQuotaExceeded (storage failure): quota (thrown) | body@1 apply@1 settled:refused@1 settled@3 next turn@5",
  "commit after-commit-throws thenable":
    "refused Error: afterCommit | body@1 apply@1 applied@3 published@4 afterCommit@4 settled:refused@4 settled@6 next turn@8",
  "record write ok": "stored 1 | body@1 apply@1 applied@2 published@3 settled:stored@3 settled@7 next turn@7",
  "record write reject":
    "refused StorageQuotaExceeded (storage failure): quota (rejected) | body@1 apply@1 settled:refused@2 settled@6 next turn@6",
  "record write throw":
    "refused StorageQuotaExceeded (storage failure): quota (thrown) | body@1 apply@1 settled:refused@1 settled@5 next turn@5",
  "record write thenable": "stored 1 | body@1 apply@1 applied@3 published@4 settled:stored@4 settled@8 next turn@8",
  "record none ok": "stored nothing | body@1 settled:stored@1 settled@5 next turn@5",
  "record none reject": "stored nothing | body@1 settled:stored@1 settled@5 next turn@5",
  "record none throw": "stored nothing | body@1 settled:stored@1 settled@5 next turn@5",
  "record none thenable": "stored nothing | body@1 settled:stored@1 settled@5 next turn@5",
  "record throws ok": "refused Error: callback | body@1 settled:refused@1 settled@5 next turn@5",
  "record throws reject": "refused Error: callback | body@1 settled:refused@1 settled@5 next turn@5",
  "record throws throw": "refused Error: callback | body@1 settled:refused@1 settled@5 next turn@5",
  "record throws thenable": "refused Error: callback | body@1 settled:refused@1 settled@5 next turn@5",
  "record promise ok":
    "refused InvalidCommit: A commit callback returned a Promise: it must be synchronous. Do the async work before the commit and stage only writes in it. | body@1 settled:refused@1 settled@5 next turn@5",
  "record promise reject":
    "refused InvalidCommit: A commit callback returned a Promise: it must be synchronous. Do the async work before the commit and stage only writes in it. | body@1 settled:refused@1 settled@5 next turn@5",
  "record promise throw":
    "refused InvalidCommit: A commit callback returned a Promise: it must be synchronous. Do the async work before the commit and stage only writes in it. | body@1 settled:refused@1 settled@5 next turn@5",
  "record promise thenable":
    "refused InvalidCommit: A commit callback returned a Promise: it must be synchronous. Do the async work before the commit and stage only writes in it. | body@1 settled:refused@1 settled@5 next turn@5",
  "record check-pass ok": "stored 1 | body@1 check@1 apply@3 applied@4 published@5 settled:stored@5 settled@9 next turn@9",
  "record check-pass reject":
    "refused StorageQuotaExceeded (storage failure): quota (rejected) | body@1 check@1 apply@3 settled:refused@4 settled@8 next turn@8",
  "record check-pass throw":
    "refused StorageQuotaExceeded (storage failure): quota (thrown) | body@1 check@1 apply@3 settled:refused@3 settled@7 next turn@7",
  "record check-pass thenable": "stored 1 | body@1 check@1 apply@3 applied@5 published@6 settled:stored@6 settled@10 next turn@10",
  "record check-fail ok": "refused Error: check | body@1 check@1 settled:refused@3 settled@7 next turn@7",
  "record check-fail reject": "refused Error: check | body@1 check@1 settled:refused@3 settled@7 next turn@7",
  "record check-fail throw": "refused Error: check | body@1 check@1 settled:refused@3 settled@7 next turn@7",
  "record check-fail thenable": "refused Error: check | body@1 check@1 settled:refused@3 settled@7 next turn@7",
  "record after-commit-throws ok":
    "refused Error: afterCommit | body@1 apply@1 applied@2 published@3 afterCommit@3 settled:refused@3 settled@7 next turn@7",
  "record after-commit-throws reject":
    "refused StorageQuotaExceeded (storage failure): quota (rejected) | body@1 apply@1 settled:refused@2 settled@6 next turn@6",
  "record after-commit-throws throw":
    "refused StorageQuotaExceeded (storage failure): quota (thrown) | body@1 apply@1 settled:refused@1 settled@5 next turn@5",
  "record after-commit-throws thenable":
    "refused Error: afterCommit | body@1 apply@1 applied@3 published@4 afterCommit@4 settled:refused@4 settled@8 next turn@8",
  "ungrouped write ok": "stored 1 | body@1 apply@1 applied@2 published@3 settled:stored@3 settled@5 next turn@7",
  "ungrouped write reject":
    "refused StorageQuotaExceeded (storage failure): quota (rejected) | body@1 apply@1 settled:refused@2 settled@4 next turn@6",
  "ungrouped write throw":
    "refused StorageQuotaExceeded (storage failure): quota (thrown) | body@1 apply@1 settled:refused@1 settled@3 next turn@5",
  "ungrouped write thenable": "stored 1 | body@1 apply@1 applied@3 published@4 settled:stored@4 settled@6 next turn@8",
  "ungrouped none ok": "stored nothing | body@1 settled:stored@1 settled@3 next turn@5",
  "ungrouped none reject": "stored nothing | body@1 settled:stored@1 settled@3 next turn@5",
  "ungrouped none throw": "stored nothing | body@1 settled:stored@1 settled@3 next turn@5",
  "ungrouped none thenable": "stored nothing | body@1 settled:stored@1 settled@3 next turn@5",
  "ungrouped throws ok": "refused Error: callback | body@1 settled:refused@1 settled@3 next turn@5",
  "ungrouped throws reject": "refused Error: callback | body@1 settled:refused@1 settled@3 next turn@5",
  "ungrouped throws throw": "refused Error: callback | body@1 settled:refused@1 settled@3 next turn@5",
  "ungrouped throws thenable": "refused Error: callback | body@1 settled:refused@1 settled@3 next turn@5",
  "ungrouped promise ok":
    "refused InvalidCommit: A commit callback returned a Promise: it must be synchronous. Do the async work before the commit and stage only writes in it. | body@1 settled:refused@1 settled@3 next turn@5",
  "ungrouped promise reject":
    "refused InvalidCommit: A commit callback returned a Promise: it must be synchronous. Do the async work before the commit and stage only writes in it. | body@1 settled:refused@1 settled@3 next turn@5",
  "ungrouped promise throw":
    "refused InvalidCommit: A commit callback returned a Promise: it must be synchronous. Do the async work before the commit and stage only writes in it. | body@1 settled:refused@1 settled@3 next turn@5",
  "ungrouped promise thenable":
    "refused InvalidCommit: A commit callback returned a Promise: it must be synchronous. Do the async work before the commit and stage only writes in it. | body@1 settled:refused@1 settled@3 next turn@5",
  "ungrouped check-pass ok": "stored 1 | body@1 check@1 apply@3 applied@4 published@5 settled:stored@5 settled@7 next turn@9",
  "ungrouped check-pass reject":
    "refused StorageQuotaExceeded (storage failure): quota (rejected) | body@1 check@1 apply@3 settled:refused@4 settled@6 next turn@8",
  "ungrouped check-pass throw":
    "refused StorageQuotaExceeded (storage failure): quota (thrown) | body@1 check@1 apply@3 settled:refused@3 settled@5 next turn@7",
  "ungrouped check-pass thenable": "stored 1 | body@1 check@1 apply@3 applied@5 published@6 settled:stored@6 settled@8 next turn@10",
  "ungrouped check-fail ok": "refused Error: check | body@1 check@1 settled:refused@3 settled@5 next turn@7",
  "ungrouped check-fail reject": "refused Error: check | body@1 check@1 settled:refused@3 settled@5 next turn@7",
  "ungrouped check-fail throw": "refused Error: check | body@1 check@1 settled:refused@3 settled@5 next turn@7",
  "ungrouped check-fail thenable": "refused Error: check | body@1 check@1 settled:refused@3 settled@5 next turn@7",
  "ungrouped after-commit-throws ok":
    "refused Error: afterCommit | body@1 apply@1 applied@2 published@3 afterCommit@3 settled:refused@3 settled@5 next turn@7",
  "ungrouped after-commit-throws reject":
    "refused StorageQuotaExceeded (storage failure): quota (rejected) | body@1 apply@1 settled:refused@2 settled@4 next turn@6",
  "ungrouped after-commit-throws throw":
    "refused StorageQuotaExceeded (storage failure): quota (thrown) | body@1 apply@1 settled:refused@1 settled@3 next turn@5",
  "ungrouped after-commit-throws thenable":
    "refused Error: afterCommit | body@1 apply@1 applied@3 published@4 afterCommit@4 settled:refused@4 settled@6 next turn@8",
};
