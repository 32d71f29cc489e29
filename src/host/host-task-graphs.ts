/**
 * The host's task graphs (split out of host.ts, decision 0140): a page's `watchTasks` hears the harness's inspection,
 * once at the start and then after each burst of commits that touched a task (coalesced in a microtask: a view never
 * shows anything uncommitted). They hear it again from each harness the host opens next, as the views move (review of
 * 0140, L2: after a takeover and return they kept the old graph, without what the other tab did, until a commit here).
 */
import { BACKGROUND_CONTEXT as ctx } from "../base/context.ts";
import { safely } from "../base/safely.ts";
import type { Harness, Inspection } from "../harness.ts";
import type { Rebind } from "./host-views.ts";
import { Listeners } from "./listeners.ts";
import type { Unsubscribe } from "./protocol.ts";

export function hostTaskGraphs(harness: () => Harness | undefined, moves: Set<Rebind>) {
  const graphs = new Listeners<Inspection>();
  let scheduled = false;
  const schedule = (): void => {
    if (scheduled || graphs.size === 0) return;
    scheduled = true;
    queueMicrotask(() => {
      scheduled = false;
      const now = harness();
      if (now && !now.closed)
        now.inspect(ctx).then(
          (inspection) => graphs.emit(inspection),
          () => {},
        ); // closed meanwhile
    });
  };
  moves.add((next) => void (next instanceof Error || schedule())); // no harness will come: nothing to tell
  return {
    /** A commit touched a task: the watchers hear the inspection after the burst. */
    schedule,
    watch(listener: (inspection: Inspection) => void): Unsubscribe {
      const unsubscribe = graphs.add(listener);
      let subscribed = true;
      const now = harness();
      if (now) void now.inspect(ctx).then((inspection) => subscribed && safely(() => listener(inspection)));
      return () => {
        subscribed = false;
        unsubscribe();
      };
    },
    size: () => graphs.size,
  };
}
