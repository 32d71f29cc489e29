/**
 * The host's task graphs (split out of host.ts, decision 0140): a page's `watchTasks` hears the harness's inspection,
 * once at the start and then after each burst of commits that touched a task (coalesced in a microtask: a view never
 * shows anything uncommitted).
 */
import { BACKGROUND_CONTEXT as ctx } from "../base/context.ts";
import { safely } from "../base/safely.ts";
import type { Harness, Inspection } from "../harness.ts";
import { Listeners } from "./listeners.ts";
import type { Unsubscribe } from "./protocol.ts";

export function hostTaskGraphs(harness: () => Harness | undefined) {
  const graphs = new Listeners<Inspection>();
  let scheduled = false;
  return {
    /** A commit touched a task: the watchers hear the inspection after the burst. */
    schedule(): void {
      if (scheduled || graphs.size === 0) return;
      scheduled = true;
      queueMicrotask(async () => {
        scheduled = false;
        const now = harness();
        if (!now || now.closed) return;
        graphs.emit(await now.inspect(ctx));
      });
    },
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
