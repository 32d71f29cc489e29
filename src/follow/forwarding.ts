/**
 * Writes forwarded from a place that serves a read-only copy of a conversation to the place that holds its lease
 * (decision 0034): the shapes both sides exchange, the check the holder makes of what arrives (it came over a
 * socket: hostile until checked), and the holder's half — it makes the write locally under the same key, so a
 * forward that arrives twice is answered with the same result and does nothing more.
 *
 * Which methods are forwarded, their argument schemas and their idempotency keys are their rows in `PROTOCOL`
 * (`forwarded`, `args`, `key`); nothing here lists them again.
 */
import type { ApprovalRecord, Decision } from "../agent/tasks/approvals.ts";
import type { SubmissionDraft } from "../agent/types.ts";
import { type Context, throwIfCancelled } from "../base/context.ts";
import type { Json } from "../base/json.ts";
import {
  ConnectionLost,
  FollowMessageRefused,
  HarnessClosed,
  InvalidArguments,
  LeaseNotHeld,
  ReadOnlySession,
  StaleEpoch,
} from "../errors.ts";
import type { Harness } from "../harness.ts";
import { type MethodName, type MethodPolicy, PROTOCOL } from "../host/protocol.ts";
import { type ArgsCheck, args, type Check, describeValue, id, integer, list, literal, record, text } from "../shape.ts";

/** The methods a copy forwards (rows with `forwarded: true`). */
export type ForwardedMethod = "submit" | "decide" | "abortConversation";

/**
 * One write as it crosses from the copy to the holder: the method's own arguments, its key filled in
 * (`requestId`, `decisionId`). An abort names the tasks it stops (the run and compactions the copy saw), so a
 * duplicate that arrives after they ended stops nothing newer. On the follow link it is a call of topic
 * `forward` (`FORWARD_TOPIC`), its `method` and `args` as they are here.
 */
export type ForwardedWrite =
  | { method: "submit"; args: [conversationId: number, draft: SubmissionDraft] }
  | { method: "decide"; args: [conversationId: number, call: string | number, decision: Decision] }
  | { method: "abortConversation"; args: [conversationId: number, tasks: number[]] };

/** What the holder answers: the submission it admitted (or had admitted under that key), the decision, or done. */
export type ForwardAnswer =
  | { method: "submit"; submissionId: number }
  | { method: "decide"; record: ApprovalRecord }
  | { method: "abortConversation" };

/**
 * The holder as a copy reaches it: the follow link implements it (the object sends the write to the tab and
 * resolves with its answer). Rejects with the holder's own error (its class kept across the wire), or with
 * `ConnectionLost` when it cannot tell whether the write arrived: the copy sends it again, which is harmless.
 */
export interface HolderPort {
  forward(write: ForwardedWrite): Promise<ForwardAnswer>;
}

/** At most this many tasks named by a forwarded abort (a run and its conversation's compactions). */
const ABORT_TASKS = 100;
const abortArgs = args([id, list(id, ABORT_TASKS)]);

/**
 * What is wrong with the arguments of forwarded `method` from a stranger, or undefined: its row in `PROTOCOL` checks
 * them and its key (a forwarded keyed write must carry it); an abort's are its conversation and the tasks it stops.
 */
export function forwardedArgsProblem(method: string, values: unknown): string | undefined {
  if (!Object.hasOwn(PROTOCOL, method) || !PROTOCOL[method as MethodName].forwarded)
    return `a forwarded write's method must be one a copy forwards (${forwardedMethods().join(", ")}); got ${describeValue(method)}`;
  if (method === "abortConversation") return abortArgs(values as readonly unknown[]);
  const row: MethodPolicy = PROTOCOL[method as ForwardedMethod];
  const problem = row.args(values as readonly unknown[]);
  if (problem) return problem;
  const key = row.key;
  if (key && typeof ((values as unknown[])[key.arg] as Record<string, unknown>)[key.field] !== "string")
    return `a forwarded ${method} must carry its ${key.field} (argument ${key.arg + 1}): it is what makes a second forward harmless`;
  return undefined;
}

/** What is wrong with a forwarded write `{ method, args }` from a stranger, or undefined. */
export function forwardedProblem(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value))
    return `a forwarded write must be an object; got ${describeValue(value)}`;
  const extra = Object.keys(value).find((key) => key !== "method" && key !== "args");
  if (extra !== undefined) return `a forwarded write has no field ${describeValue(extra)}`;
  const { method, args: values } = value as { method?: unknown; args?: unknown };
  if (typeof method !== "string") return `a forwarded write's method must be a string; got ${describeValue(method)}`;
  return forwardedArgsProblem(method, values);
}

function forwardedMethods(): ForwardedMethod[] {
  return (Object.keys(PROTOCOL) as MethodName[]).filter((name): name is ForwardedMethod => PROTOCOL[name].forwarded);
}

/** The follow link's topic of forwarded writes (its name in `FOLLOW_TOPICS`). */
export const FORWARD = "forward";

/** The follow link's topic of forwarded writes: the object calls them, the tab answers (`answerForwarded`). */
export const FORWARD_TOPIC: { calledBy: "object"; methods: Record<string, ArgsCheck> } = {
  calledBy: "object",
  methods: Object.fromEntries(forwardedMethods().map((method) => [method, (values) => forwardedArgsProblem(method, values)])),
};

/**
 * The holder's half: makes a write a copy forwarded, here, under its key. `write` is whatever arrived; it is
 * checked first (`InvalidArguments`, nothing done). A submission under a `requestId` this conversation used already
 * answers that submission; a decision under its `decisionId` answers the record; an abort of tasks that all ended
 * does nothing. Errors are the local call's own (`ConversationBusy`, `NotFound`, `ReadOnlySession` at a place that
 * lost the lease, …): send them back as they are.
 */
export async function answerForwarded(harness: Harness, write: unknown, context: Context): Promise<ForwardAnswer> {
  throwIfCancelled(context);
  const problem = forwardedProblem(write);
  if (problem) throw new InvalidArguments("forward", problem);
  const checked = write as ForwardedWrite;
  const conversation = harness.conversation(checked.args[0]);
  switch (checked.method) {
    case "submit":
      return { method: "submit", submissionId: (await conversation.submit(checked.args[1], context)).id };
    case "decide":
      return { method: "decide", record: await conversation.decide(checked.args[1], checked.args[2], context) };
    case "abortConversation": {
      const tasks = await Promise.all(checked.args[1].map((task) => harness.getTask(task, context)));
      const running = tasks.some((task) => task && task.conversationId === conversation.id && task.state.status !== "terminal");
      if (running) await conversation.abort(context);
      return { method: "abortConversation" };
    }
  }
}

/**
 * Whether a forward failed because no holder could take it now — the link is down, or the place it reached no
 * longer holds the lease (closed, fenced, handed over) — so the copy sends it again later (to whoever holds the
 * lease then), rather than failing the caller.
 */
export function holderUnreachable(error: unknown): boolean {
  return (
    error instanceof ConnectionLost ||
    error instanceof HarnessClosed ||
    error instanceof ReadOnlySession ||
    error instanceof LeaseNotHeld ||
    error instanceof StaleEpoch
  );
}

/**
 * A decision's record as it arrives over a socket (the holder's answer, or the object's to a following tab): the
 * record is the holder's; what crosses checks what it relies on and passes the rest as the holder made it.
 */
export const approvalRecordShape: Check = (value, path) =>
  typeof value === "object" && value !== null && !Array.isArray(value)
    ? (integer(1, Number.MAX_SAFE_INTEGER)((value as Record<string, unknown>).taskId, `${path}.taskId`) ??
      text({ max: 200 })((value as Record<string, unknown>).callId, `${path}.callId`) ??
      literal("awaiting", "approved", "denied", "withdrawn")((value as Record<string, unknown>).status, `${path}.status`))
    : `${path} must be an object; got ${describeValue(value)}`;

/** The holder's answer as it must look for each method: it came over a socket. */
const ANSWERS: Record<ForwardedMethod, Check> = {
  submit: record({ method: literal("submit"), submissionId: id }),
  decide: record({ method: literal("decide"), record: approvalRecordShape }),
  abortConversation: record({ method: literal("abortConversation") }),
};

/**
 * The holder as a follow link's call reaches it (`call(topic, method, args)`: the object's `ObjectEnd.call`),
 * each answer checked as the write's own (`FollowMessageRefused`, shape, otherwise: the caller is told, not fed).
 */
export function linkHolder(call: (topic: string, method: string, args: Json[]) => Promise<Json>): HolderPort {
  return {
    async forward(write) {
      const answer: unknown = await call(FORWARD, write.method, write.args as unknown as Json[]);
      const problem = ANSWERS[write.method](answer, `the holder's answer to a forwarded ${write.method}`);
      if (problem) throw new FollowMessageRefused("shape", problem);
      return answer as ForwardAnswer;
    },
  };
}
