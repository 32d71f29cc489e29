import { NotFound } from "../errors.ts";
import { describeValue } from "../shape.ts";
import type { Storage } from "../storage/storage.ts";

/** The parts of a session that know ids (the agent's narrower view of it has them too). */
export interface IdSource {
  readonly live: ReadonlyMap<number, unknown>;
  readonly conversations: ReadonlyMap<number, unknown>;
  readonly openSubmissions: ReadonlyMap<number, unknown>;
  readonly storage: Pick<Storage, "getTask" | "getEntry" | "getSubmission">;
}

/** What an id can name. Conversations, entries, tasks and submissions draw their ids from one space (S1). */
export type IdKind = "conversation" | "entry" | "task" | "submission";

/**
 * What `id` names, as far as the session's mirrors know (live tasks, conversations, open submissions): enough
 * for a synchronous caller to tell "the id of something else" from "no such id".
 */
export function mirroredKind(session: IdSource, id: number): IdKind | undefined {
  if (session.live.has(id)) return "task";
  if (session.conversations.has(id)) return "conversation";
  if (session.openSubmissions.has(id)) return "submission";
  return undefined;
}

/** What `id` names: the mirrors first, then storage (terminal tasks, entries, settled submissions). */
export async function storedKind(session: IdSource, id: number): Promise<IdKind | undefined> {
  const mirrored = mirroredKind(session, id);
  if (mirrored) return mirrored;
  if (!Number.isSafeInteger(id)) return undefined;
  if (await session.storage.getTask(id)) return "task";
  if (await session.storage.getEntry(id)) return "entry";
  if (await session.storage.getSubmission(id)) return "submission";
  return undefined;
}

/**
 * `NotFound` for a `wanted` id; when the id names something else, the message says what (one id space makes
 * a mix-up of ids visible instead of silent: a task's id never finds a conversation).
 */
export function notFound(wanted: IdKind, id: number, actual?: IdKind): NotFound {
  const name = `${wanted[0]!.toUpperCase()}${wanted.slice(1)}`;
  const hint = actual && actual !== wanted ? ` (${id} is ${actual === "entry" ? "an" : "a"} ${actual}'s id)` : "";
  // An id a caller passed unchecked (a task's input handed on) may be anything: described, never String()ed.
  return new NotFound(`${name} ${describeValue(id)} does not exist${hint}.`);
}
