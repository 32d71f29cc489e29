import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { twoPlaceSweep } from "../src/testing/two-places/sweep.ts";
import { deferringBackend, SEED_QUERY } from "./deferred-support.ts";
import { walkerTurn } from "./walker-scenario.ts";

// Decision 0088 (the seam decision 0081 left): the two-place sweeps of test/deferred-sweeps.test.ts run agent turns, whose
// commits mostly write entries, so only 4–6 of 74–152 crash images had task rows waiting. Here the scenario is a walk
// of effect-free steps under the lease (test/walker-scenario.ts): each step's memo write and checkpoint defer, on the
// tab and, after the hand-over, on the object. Every commit of both places and every hand-over message is a crash
// point; the count of crash images taken while rows waited is asserted, and a missing replay prints a tick twice.
// On the reliable link one in four such images is also opened read-only (S5, decision 0088's overlay): the same tasks
// as a writable open, the file's bytes unchanged (each check is two opens; the other two sweeps count them only).

const sha = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

/** A backend that reads one in four crash images with rows waiting read-only and writable: the same tasks, nothing written. */
function checkedBackend() {
  const checked = { images: 0, seen: 0 };
  const backend = deferringBackend(true, async (image) => {
    if (checked.seen++ % 4 !== 0) return; // one in four: each check is two opens
    const before = sha(image);
    const viewer = await openSqliteStorage({ vfs: "memory", image, readOnly: true });
    const writable = await openSqliteStorage({ vfs: "memory", image: image.slice() });
    expect(await viewer.listTasks()).toEqual(await writable.listTasks());
    expect(await viewer.query(SEED_QUERY)).toEqual(await writable.query(SEED_QUERY));
    expect(sha(await viewer.database.exportImage())).toBe(before);
    await viewer.close();
    await writable.close();
    checked.images++;
  });
  return { backend, checked };
}

describe("the two-place sweep of effect-free steps with deferred task rows (decision 0088)", { timeout: 600_000 }, () => {
  it("S4: a crash at every commit of the tab and the object and at every hand-over message: most crashes find rows waiting, every tick once and in order", async () => {
    const { backend, checked } = checkedBackend();
    const result = await twoPlaceSweep(walkerTurn, { storage: backend });
    expect(checked.images).toBe(Math.ceil(backend.seen.behind / 4));
    console.log(`two-place sweep of a walk, deferring, reliable link: ${JSON.stringify(result)}, images ${JSON.stringify(backend.seen)}`);
    expect(result.commits.tab).toBeGreaterThan(10);
    expect(result.commits.object).toBeGreaterThan(10);
    expect(backend.seen.behind).toBeGreaterThanOrEqual(70);
    expect(backend.seen.behind / backend.seen.images).toBeGreaterThan(0.6);
  });

  it("S4: the same with a live mirror, the tab crashing at any commit and reloading at once (its rows replayed from its own log)", async () => {
    const backend = deferringBackend();
    const result = await twoPlaceSweep(walkerTurn, { storage: backend, mirror: true });
    console.log(`two-place sweep of a walk, deferring, live mirror: ${JSON.stringify(result)}, images ${JSON.stringify(backend.seen)}`);
    expect(result.forks).toBe(0);
    expect(backend.seen.behind).toBeGreaterThanOrEqual(70);
    expect(backend.seen.behind / backend.seen.images).toBeGreaterThan(0.4); // the hand-over's 35 messages are crash points too
  });

  it("S4: the same over the product's follow link (FollowLink, Mirror, ObjectEnd: decision 0040), the tab reloading at once", async () => {
    const backend = deferringBackend();
    const result = await twoPlaceSweep(walkerTurn, { storage: backend, followLink: true });
    console.log(`two-place sweep of a walk, deferring, follow link: ${JSON.stringify(result)}, images ${JSON.stringify(backend.seen)}`);
    expect(result.forks).toBe(0);
    expect(backend.seen.behind).toBeGreaterThanOrEqual(70);
  });
});
