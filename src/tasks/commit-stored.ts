import type { Context } from "../base/context.ts";
import type { Json } from "../base/json.ts";
import { isStorageFailure } from "../session/storage-failure.ts";
import type { Tx } from "../session/tx.ts";
import type { Checkpoint, TaskRecord } from "../storage/records.ts";
import { retryDelay } from "./timers.ts";
import type { NextTaskState, TaskRuntime } from "./types.ts";

/**
 * `runtime.commit` for a commit that records something done off the line and not to be done again (a tool's
 * result, a model's answer): when storage refuses it (a full quota, B9) the same commit is tried again after a
 * backoff on the harness clock (100 ms doubling up to 30 s), each refusal reported, until it is stored or the
 * invocation ends. Rerunning the step instead would rerun the tool or resend the request.
 */
export async function commitStored<S extends Checkpoint, R, T extends Tx = Tx>(
  runtime: Omit<TaskRuntime<S, R>, "commit"> & {
    commit(change: (tx: T, current: TaskRecord<Json, S, R>) => NextTaskState<S, R> | undefined, context: Context): Promise<void>;
  },
  change: (tx: T, current: TaskRecord<Json, S, R>) => NextTaskState<S, R> | undefined,
  context: Context,
): Promise<void> {
  for (let failures = 0; ; failures++) {
    try {
      await runtime.commit(change, context);
      return;
    } catch (error) {
      if (!isStorageFailure(error) || runtime.signal.aborted) throw error;
      runtime.report({ kind: "error", error, taskId: runtime.taskId });
      const signal = runtime.signal;
      await new Promise<void>((resolve) => {
        runtime.setTimer(retryDelay(failures), resolve);
        signal.addEventListener("abort", () => resolve(), { once: true });
      });
    }
  }
}
