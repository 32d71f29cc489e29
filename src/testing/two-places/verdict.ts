/**
 * The verdict on one world of the two-place sweep, once both places stopped (sweep.ts): the kernel's invariants over
 * the holder's storage and every copy, decision 0032's "nothing with an effect lost", the visible fork where the
 * object took over, and the scenario's own invariants.
 */
import type { Storage } from "../../storage/storage.ts";
import { BUILT_IN_CHECKS } from "../sweep/invariants.ts";
import type { CrashWorldView } from "../sweep/types.ts";
import type { Recorder } from "../sweep/world.ts";
import { checkFork, type StoredLog } from "./fork-check.ts";
import type { Place, TwoPlaceOptions, TwoPlaceScenario } from "./types.ts";

export interface WorldEnd<W> {
  scenario: TwoPlaceScenario<W>;
  options: TwoPlaceOptions;
  recorder: Recorder<W>;
  /** What each place stored at each log position. */
  stored: Record<Place, StoredLog>;
  log: string[];
  /** The place that holds the log at the end (the object took over, or the tab finished with the object following). */
  ending: Place;
  /** The object may have taken the lease by its expiry (the tab stayed away, or was partitioned). */
  takeover: boolean;
  storages: Record<Place, Storage>;
  /** The other place's storage and every crash image: copies whose rows must all be in the holder's history. */
  copies: Array<{ place: Place; storage: Storage }>;
}

/** The first invariant the world broke and why, or whether it ended with a fork. */
export async function judgeWorld<W>(end: WorldEnd<W>): Promise<{ invariant: string; detail: string } | { forked: boolean }> {
  const { scenario, options, recorder, stored, ending, takeover, storages } = end;
  // Where the object took over by the expiry, the tab's copies are left out: its unpushed stretch may be lost —
  // nothing with an effect, which the check after the built-in ones proves.
  const copies = end.copies.filter((copy) => !(takeover && ending === "object" && copy.place === "tab"));
  const view: CrashWorldView<W> = {
    crashes: [],
    state: recorder.state,
    storage: storages[ending],
    atCrash: copies.map((copy) => copy.storage),
    effects: recorder.effects,
    lines: recorder.lines,
    toolRuns: recorder.toolRuns,
    log: end.log,
  };
  for (const [invariant, check] of BUILT_IN_CHECKS) {
    if (invariant === "no-resend-before-backoff" || options.skip?.includes(invariant)) continue;
    const problem = await check(view as CrashWorldView<unknown>);
    if (problem) return { invariant, detail: problem };
  }
  // Decision 0032: every effect the tab started is in the object's history — the very transaction that recorded it.
  const effects = scenario.effects?.(recorder.view()) ?? [];
  for (const effect of effects) {
    const tabs = stored.tab.get(effect.position);
    const objects = stored.object.get(effect.position);
    if (objects && objects.epoch === tabs?.epoch && objects.text === tabs.text) continue;
    return {
      invariant: "nothing with an effect lost",
      detail: `${effect.what} started in the tab after its commit at position ${effect.position}, which the object's history ${objects ? `holds another transaction at (epoch ${objects.epoch})` : "lacks"}`,
    };
  }
  let forked = false;
  if (takeover && ending === "object") {
    const found = await checkFork(storages.tab, storages.object, stored, effects);
    if (found.problem) return { invariant: "the visible fork", detail: found.problem };
    forked = found.forked;
  }
  for (const [index, check] of (scenario.invariants ?? []).entries()) {
    const problem = await check(view);
    if (problem) return { invariant: `invariant ${index + 1} of the scenario`, detail: problem };
  }
  return { forked };
}
