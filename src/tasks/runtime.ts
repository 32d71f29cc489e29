import { type Context, throwIfCancelled, waitFor } from "../context.ts";
import type { ExecutionEnv } from "../env/types.ts";
import { DurableError, HarnessClosed, InvalidCommit, InvocationEnded } from "../errors.ts";
import { cloneJson, deepFreeze, type Json } from "../json.ts";
import { deliver, type Report } from "../reports.ts";
import { notFound, storedKind } from "../session/ids.ts";
import { isStorageFailure, type Session } from "../session/session.ts";
import { documentKey, type KernelTx } from "../session/tx.ts";
import type { EntryRecord, TaskOutcome, TaskRecord } from "../storage/records.ts";
import type { Invocation } from "./invocation.ts";
import type { LiveIndex } from "./live-index.ts";
import type { SchedulerOptions } from "./options.ts";
import type { Registry } from "./registry.ts";
import { applyNext } from "./transitions.ts";
import type { TaskRuntime } from "./types.ts";

export interface TaskRuntimesOptions {
  readonly session: Session;
  readonly registry: Registry;
  readonly index: LiveIndex;
  readonly options: SchedulerOptions;
  /** True once the scheduler is closing: every commit of a phase is refused from then on. */
  readonly closing: () => boolean;
}

/** Makes each invocation's `TaskRuntime` (S3): what a phase can do, every call refused once it has ended. */
export class TaskRuntimes {
  readonly #host: TaskRuntimesOptions;
  /**
   * Recently read entries (frozen; entries never change), shared by concurrent readers: the tool tasks of one
   * round all read the same assistant entry.
   */
  readonly #entries = new Map<number, Promise<EntryRecord | undefined>>();

  constructor(host: TaskRuntimesOptions) {
    this.#host = host;
  }

  create(invocation: Invocation): TaskRuntime {
    const { session, registry, index, options, closing } = this.#host;
    const entries = this.#entries;
    const id = invocation.taskId;
    const first = session.live.get(id)!;
    const actor = { conversationId: first.conversationId, taskId: id };
    const stored = (member: number) => session.storage.getTask(member);
    const check = () => {
      if (invocation.ended) throw new InvocationEnded(id);
    };
    const gated = <T>(body: (tx: KernelTx, current: TaskRecord) => T): Promise<T> =>
      onLine(body).then(
        (result) => {
          invocation.storageFailure = undefined; // a refusal the phase retried is no longer its failure
          return result;
        },
        (error: unknown) => {
          if (isStorageFailure(error)) invocation.storageFailure = error;
          throw error;
        },
      );
    const onLine = <T>(body: (tx: KernelTx, current: TaskRecord) => T): Promise<T> =>
      session.commit((tx) => {
        if (invocation.ended) throw new InvocationEnded(id);
        if (closing()) throw new HarnessClosed();
        const current = tx.task(id);
        if (!current) throw new InvalidCommit(`Task ${id} is terminal.`);
        if (current.state.status !== "running") throw new InvalidCommit(`Task ${id} is ${current.state.status}.`);
        if (invocation.mode === "run" && current.abortRequested) throw new InvalidCommit(`Task ${id} has a durable abort mark.`);
        return body(tx, current);
      }, actor);

    const runtime: TaskRuntime = {
      taskId: id,
      conversationId: first.conversationId,
      get signal() {
        return invocation.cancellation.signal;
      },
      get settings() {
        return options.settings;
      },
      models: options.models,
      commit: async (change, context) => {
        check();
        throwIfCancelled(context);
        const committed = gated((tx, current) => {
          // `current` is the committed record itself (frozen), not a copy.
          const next = change(tx, current);
          if (typeof (next as { then?: unknown } | undefined)?.then === "function") {
            throw new InvalidCommit(
              `The change callback of runtime.commit (task ${id}) returned a Promise: it must be synchronous. Do the async work before commit and return the next state (or undefined).`,
            );
          }
          if (next !== undefined) applyNext(tx, index, current, next, invocation.mode, stored);
        });
        // The invocation's own context needs no extra wait: its end already rejects the commit on the line.
        await (context === invocation.context ? committed : waitFor(committed, context));
        if (options.crashPoint) await runtime.crashPoint("task:after-commit");
      },
      crashPoint: async (name) => {
        check();
        const handler = options.crashPoint;
        if (handler) await handler(name, { taskId: id, taskKind: first.kind, conversationId: first.conversationId });
      },
      memo: (async (name: string, ...rest: unknown[]) => {
        check();
        if (rest.length < 2) {
          const memos = session.live.get(id)?.memos;
          return memos && Object.hasOwn(memos, name) ? memos[name] : undefined;
        }
        const [value, context] = rest as [Json, Context];
        throwIfCancelled(context);
        const writing = gated((tx, current) => {
          const memos = current.memos ?? {};
          if (Object.hasOwn(memos, name)) return cloneJson(memos[name]) as Json;
          tx.putTask({ ...current, memos: { ...memos, [name]: cloneJson(value) } });
          return value;
        });
        // Like commit: the invocation's own context needs no extra wait (its end rejects the write on the line).
        const written = await (context === invocation.context ? writing : waitFor(writing, context));
        if (options.crashPoint) await runtime.crashPoint("memo:after-write");
        return written;
      }) as TaskRuntime["memo"],
      sleepUntil: (at, checkpoint, context) => runtime.commit(() => ({ status: "sleeping", until: at, checkpoint }), context),
      now: () => {
        check();
        return options.clock.now();
      },
      outcomes: async (ids, context) => {
        check();
        throwIfCancelled(context);
        const out: TaskOutcome[] = [];
        for (const member of ids) {
          if (session.live.has(member)) throw new InvalidCommit(`Task ${member} is not terminal.`);
          const record = await session.storage.getTask(member);
          if (!record) throw notFound("task", member, await storedKind(session, member));
          if (record.state.status !== "terminal") throw new InvalidCommit(`Task ${member} is not terminal.`);
          out.push(record.state.outcome);
        }
        return out;
      },
      getTask: async (taskId, context) => {
        check();
        throwIfCancelled(context);
        return session.live.get(taskId) ?? session.storage.getTask(taskId);
      },
      report: (report: Report) => {
        check();
        deliver(options.onReport, report);
      },
      live: (event) => {
        if (invocation.ended) return; // a late event of an ended invocation shows nothing
        options.onLive?.({ taskId: id, conversationId: first.conversationId, event });
      },
      env: async <E extends ExecutionEnv>(context: Context) => {
        check();
        throwIfCancelled(context);
        if (!options.env) throw new DurableError("No execution environment: pass HarnessOptions.env to give tasks one.");
        return (await options.env(first.conversationId, context)) as E;
      },
      registry,
      entries: async (query, context) => {
        check();
        throwIfCancelled(context);
        const conversationId = query.conversationId ?? first.conversationId;
        // A wrong id would list nothing, silently: say what it is instead.
        if (!session.conversations.has(conversationId))
          throw notFound("conversation", conversationId, await storedKind(session, conversationId));
        return session.storage.listEntries(conversationId, query.afterId === undefined ? {} : { afterId: query.afterId });
      },
      entry: async (entryId, context) => {
        check();
        throwIfCancelled(context);
        let read = entries.get(entryId);
        if (!read) {
          read = session.storage.getEntry(entryId).then((entry) => {
            if (!entry) entries.delete(entryId); // not committed (yet): do not remember the miss
            return entry === undefined ? undefined : deepFreeze(entry);
          });
          read.catch(() => entries.delete(entryId));
          entries.set(entryId, read);
          if (entries.size > 64) entries.delete(entries.keys().next().value!);
        }
        return read;
      },
      document: (scope, key) => {
        check();
        return cloneJson(session.documents.get(documentKey(scope, key))?.value);
      },
      setTimer: (delayMs, fire) => {
        check();
        // Timers die with the invocation: a late fire would act for a phase that already returned.
        let cancelTimer: (() => void) | undefined;
        const cancel = () => {
          cancelTimer?.();
          cancelTimer = undefined;
          invocation.cancellation.forget(cancel);
        };
        cancelTimer = options.clock.setTimer(delayMs, () => {
          cancelTimer = undefined;
          invocation.cancellation.forget(cancel);
          if (!invocation.ended) fire();
        });
        invocation.cancellation.onAbort(cancel);
        return cancel;
      },
    };
    return runtime;
  }
}
