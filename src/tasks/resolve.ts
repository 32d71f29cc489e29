import { errorMessage } from "../base/error-message.ts";
import { cloneJson, type Json } from "../base/json.ts";
import { DurableError } from "../errors.ts";
import { deliver, type ReportHandler } from "../reports.ts";
import type { BlockedReason, Checkpoint, TaskRecord } from "../storage/records.ts";
import type { Registry } from "./registry.ts";
import type { AnyTaskDefinition } from "./types.ts";

export type Resolution =
  | { ok: true; definition: AnyTaskDefinition; migrated?: { input: Json; checkpoint: Checkpoint } }
  | { ok: false; reason: BlockedReason; message: string };

/**
 * The one place that decides which installed definition runs a stored task: the kind must be installed, the
 * stored version may not be newer, and an older one is migrated. A migration that failed is reported once and
 * remembered (with the definition that failed) until the task ends or another definition is installed.
 */
export class DefinitionResolver {
  readonly #registry: Registry;
  readonly #onReport: ReportHandler | undefined;
  /** Migration failures already reported, keyed by task: the definition that failed, and why. */
  readonly #migrationFailed = new Map<number, { definition: AnyTaskDefinition; message: string }>();

  constructor(registry: Registry, onReport: ReportHandler | undefined) {
    this.#registry = registry;
    this.#onReport = onReport;
  }

  /** The definition for `task`, migrating its input and checkpoint if it is older. */
  resolve(task: TaskRecord): Resolution {
    return this.#resolve(task, true);
  }

  /** What `resolve` would decide, without running a migration or reporting (for `inspect`). */
  peek(task: TaskRecord): Resolution {
    return this.#resolve(task, false);
  }

  /** Forgets a task's migration failure (it ended). */
  forget(taskId: number): void {
    this.#migrationFailed.delete(taskId);
  }

  #resolve(task: TaskRecord, migrate: boolean): Resolution {
    const definition = this.#registry.task(task.kind);
    if (!definition) {
      return {
        ok: false,
        reason: "missing_task",
        message: `No task definition named ${task.kind} is installed; install its extension to run it.`,
      };
    }
    if (task.version === definition.version) return { ok: true, definition };
    if (task.version > definition.version) {
      return {
        ok: false,
        reason: "task_too_old",
        message: `Task ${task.id} was stored by ${task.kind} version ${task.version}, newer than the installed version ${definition.version}.`,
      };
    }
    const failed = this.#migrationFailed.get(task.id);
    if (failed?.definition === definition) return { ok: false, reason: "migration_failed", message: failed.message };
    if (!migrate) {
      return definition.migrate
        ? { ok: true, definition }
        : { ok: false, reason: "migration_failed", message: migrationFailed(task, `${task.kind} has no migration from ${task.version}.`) };
    }
    try {
      if (!definition.migrate) throw new DurableError(`${task.kind} has no migration from ${task.version}.`);
      const checkpoint = (task.state as { checkpoint?: Checkpoint }).checkpoint ?? { phase: "" };
      const migrated = definition.migrate(task.input, checkpoint, task.version);
      return { ok: true, definition, migrated: { input: cloneJson(migrated.input) as Json, checkpoint: cloneJson(migrated.checkpoint) } };
    } catch (error) {
      const message = migrationFailed(task, errorMessage(error));
      this.#migrationFailed.set(task.id, { definition, message });
      deliver(this.#onReport, { kind: "error", error, taskId: task.id });
      return { ok: false, reason: "migration_failed", message };
    }
  }
}

function migrationFailed(task: TaskRecord, why: string): string {
  return `Migrating task ${task.id} from version ${task.version} failed: ${why}`;
}
