/**
 * A follower link's calls, bounded (decision 0141). A call on a link waits for the leader's answer; before, for good:
 * a leader that never answered (a link a forger held, a leader that dropped the connection where the link could not
 * hear it) left the call — and the page that awaited it — hanging. A call may rightly take long (`waitForTask`,
 * `waitForSubmission` wait for work), so the bound is on the leader's silence, not on the call: a call unanswered for
 * `TAB_CALL_MS` makes the link ask whether the leader is there (`ask`: a `ping` its connection answers before the app's
 * door, and any frame from it counts — the review of 0141, M1; a leader before that fix answers no ping, and is asked a
 * `status` call, whose any answer — a status, a refusal, an error of its door — counts), and the call waits another bound. No answer to that ask within its own bound: the link is
 * dead — `dead()` drops it, and every call waiting on it fails with `ConnectionLost` (typed, retryable), which the tabs'
 * endpoint sends again to the leader it follows next where sending it again runs nothing twice (`retried`: reads and
 * keyed creations, ./retry.ts), and rejects otherwise.
 */
import type { Clock } from "../../base/clock.ts";

/** How long a call on a link waits for an answer before the leader is asked whether it is there, and that ask too. */
export const TAB_CALL_MS = 15_000;

type Call = (method: string, args: unknown[]) => Promise<unknown>;

/**
 * `call` with the bound; `ask()` asks whether the leader is there (settled: it is), and `dead()` is told once it gave no
 * answer in time.
 */
export function boundedCalls(call: Call, clock: Clock, dead: () => void, ask: () => Promise<unknown>): Call {
  /** The ask under way (one for every call that reached its bound meanwhile), and what waits for its answer. */
  let probe: Promise<boolean> | undefined;
  const there = (): Promise<boolean> => {
    probe ??= new Promise<boolean>((resolve) => {
      const cancel = clock.setTimer(TAB_CALL_MS, () => resolve(false));
      const answered = () => {
        cancel();
        resolve(true);
      };
      ask().then(answered, answered);
    }).then((alive) => {
      probe = undefined;
      if (!alive) dead();
      return alive;
    });
    return probe;
  };
  return (method, args) => {
    let settled = false;
    let cancel = () => {};
    const arm = () => {
      cancel = clock.setTimer(TAB_CALL_MS, () => {
        if (!settled) void there().then((alive) => alive && !settled && arm());
      });
    };
    arm();
    return call(method, args).finally(() => {
      settled = true;
      cancel();
    });
  };
}
