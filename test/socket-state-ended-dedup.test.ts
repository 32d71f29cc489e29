/**
 * The review of decision 0137, L4: `StateTold.ended()` marks the end of a wait's stretch; the next wait reported begins
 * a stretch of its own even when it equals the state told last (deduplicated, so not told again) — a lower attempt
 * later in that new stretch is not told.
 */
import { expect, it } from "vitest";
import { type SocketState, StateTold } from "../src/browser/socket-state.ts";

it("review 0137 L4: a wait equal to the ended one begins the new stretch — a lower attempt after it is not told (fails before: unserved 2 told after 3)", () => {
  const states: SocketState[] = [];
  const told = new StateTold((state) => states.push(state));
  told.unserved({ attempt: 3, retryInMs: 400 });
  told.ended(); // refused: the stretch ends, its `open` told a task later
  told.unserved({ attempt: 3, retryInMs: 400 }); // a new wait, at the same attempt and retry: deduplicated
  told.unserved({ attempt: 2, retryInMs: 200 }); // a lower one within that new stretch
  expect(states).toEqual([{ state: "unserved", attempt: 3, retryInMs: 400 }]);
});

it("0137 (kept): after ended(), a new wait at a lower attempt is told at its own attempt", () => {
  const states: SocketState[] = [];
  const told = new StateTold((state) => states.push(state));
  told.unserved({ attempt: 3, retryInMs: 400 });
  told.ended();
  told.unserved({ attempt: 1, retryInMs: 100 });
  expect(states.at(-1)).toEqual({ state: "unserved", attempt: 1, retryInMs: 100 });
});
