/**
 * A following tab's writes, made through its object (decisions 0096, 0097; issue 27 item 2): a tab on another device
 * that follows the object (its harness a read-only copy) sends its `submit`, `decide` and `abortConversation` to the
 * object over the follow link, topic `copy` (`copy.submit(conversationId, draft)` with the draft's `requestId`,
 * `copy.decide(conversationId, call, decision)` with the decision's `decisionId`, `copy.abortConversation(
 * conversationId)`). The object answers them through its copy service exactly as a page connected to it (`?edge=`):
 * forwarded to the place that holds the lease under their key, or made on the object's own host once it holds the
 * lease. A resend under the same key is answered the same and never carried out twice (the copy service and the
 * holder both key it). An abort is not keyed over the link: the object stops the runs going when it arrives (the
 * forward keyed by those tasks, so a duplicate forward stops nothing newer); the link does not send it again under a new
 * id (review of 0135, H1).
 *
 * What arrives is hostile: the frame's size and shape are the wire's (wire.ts), the arguments `PROTOCOL`'s rows with
 * their keys required (`forwardedArgsProblem`), checked again by the handler; the door (`follow.authorize`, actions
 * `copy.submit`, `copy.decide`, `copy.abortConversation`) is told the place the connection follows and the
 * conversation named. One caller has at most `MAX_WAITING_PER_CALLER` distinct writes waiting here at once
 * (waiting-writes.ts).
 *
 * ```ts
 * end.serve(COPY, copyWrites(() => copy.service)); // the object
 * const id = await submitThroughObject(link.call.bind(link), conversationId, { ...draft, requestId }); // the tab
 * ```
 */
import type { ApprovalRecord, Decision } from "../agent/tasks/approvals.ts";
import type { SubmissionDraft } from "../agent/types.ts";
import type { Json } from "../base/json.ts";
import { FollowMessageRefused, InvalidArguments, NotAuthorized } from "../errors.ts";
import { type HarnessService, PROTOCOL } from "../host/protocol.ts";
import { type ArgsCheck, id, record } from "../shape.ts";
import { approvalRecordShape, forwardedArgsProblem } from "./forwarding.ts";
import { WaitingWrites } from "./waiting-writes.ts";

/** The follow link's topic of a following tab's writes (its name in `FOLLOW_TOPICS`). */
export const COPY = "copy";

/** The writes a following tab makes through its object. */
export type CopyMethod = "submit" | "decide" | "abortConversation";

/**
 * `copy.submit(conversationId, draft)` → `{ submissionId }`; `copy.decide(conversationId, call, decision)` →
 * `{ record }`; `copy.abortConversation(conversationId)` → `{}`: the tab calls, the object answers.
 */
export const COPY_TOPIC: { calledBy: "tab"; methods: Record<CopyMethod, ArgsCheck>; keyed: readonly CopyMethod[] } = {
  calledBy: "tab",
  // Submit under the draft's requestId, decide its decisionId. Not the abort: it stops the runs going when it arrives,
  // so asked again under a new id it could stop a run started since (review of 0135, H1); its NotReady is the page's.
  keyed: ["submit", "decide"],
  methods: {
    submit: (values) => forwardedArgsProblem("submit", values),
    decide: (values) => forwardedArgsProblem("decide", values),
    abortConversation: (values) => PROTOCOL.abortConversation.args(values),
  },
};

/** The object's answers, checked where they arrive (the tab). */
const ANSWERS: Record<CopyMethod, (value: unknown, path: string) => string | undefined> = {
  submit: record({ submissionId: id }),
  decide: record({ record: approvalRecordShape }),
  abortConversation: record({}),
};

export interface CopyWritesOptions {
  /**
   * Where each caller's waiting writes are counted (decision 0097): default one of this handler's own with
   * `MAX_WAITING_PER_CALLER`; the object passes the one its pages' writes are counted in, so a caller's share is one.
   */
  waiting?: WaitingWrites;
}

/**
 * The object's handler of topic `copy` (`ObjectEnd.serve(COPY, …)`): `service()` is what pages connected to the
 * object are served (its copy service, which forwards to the holder or answers on the object's own host). `caller`
 * is who asks (`ObjectEnd` passes the authenticated caller's key, or the connection when the platform named none):
 * past its share a new write is `TooManyWaitingWrites`, nothing forwarded or stored.
 */
export function copyWrites(
  service: () => Pick<HarnessService, CopyMethod>,
  options: CopyWritesOptions = {},
): (method: string, args: Json[], caller?: unknown) => Promise<Json> {
  const waiting = options.waiting ?? new WaitingWrites();
  return async (method, args, caller) => {
    if (!Object.hasOwn(COPY_TOPIC.methods, method)) throw new NotAuthorized(`${COPY}.${method}`, "this object serves no such calls.");
    const write = method as CopyMethod;
    const problem = COPY_TOPIC.methods[write](args);
    if (problem) throw new InvalidArguments(`${COPY}.${write}`, problem);
    return waiting.run(caller, write, args, () => make(service(), write, args), `${COPY}.${write}`);
  };
}

async function make(service: Pick<HarnessService, CopyMethod>, method: CopyMethod, args: Json[]): Promise<Json> {
  const conversationId = args[0] as number;
  switch (method) {
    case "submit":
      return { submissionId: await service.submit(conversationId, args[1] as unknown as SubmissionDraft) };
    case "decide":
      return {
        record: (await service.decide(conversationId, args[1] as string | number, args[2] as unknown as Decision)) as unknown as Json,
      };
    case "abortConversation":
      await service.abortConversation(conversationId);
      return {};
  }
}

type LinkCall = (topic: string, method: string, args: Json[]) => Promise<Json>;

/** Calls `copy.<method>` over `call` and checks the object's answer (`FollowMessageRefused`, shape, otherwise). */
async function callCopy(call: LinkCall, method: CopyMethod, args: Json[]): Promise<unknown> {
  const answer: unknown = await call(COPY, method, args);
  const problem = ANSWERS[method](answer, `the object's answer to ${COPY}.${method}`);
  if (problem) throw new FollowMessageRefused("shape", problem);
  return answer;
}

/**
 * The tab's half: sends `draft` (with its `requestId`) to the object over `call` (the link's `FollowLink.call`);
 * resolves with the submission's id. Rejects with the object's error as its class (`NotAuthorized`,
 * `InvalidArguments`, `NotFound`, `TooManyWaitingWrites`, the holder's own), `ConnectionLost` when no answer came
 * (send it again under the same `requestId`), or `FollowMessageRefused` for an answer of the wrong shape (or an object
 * before decision 0096, which knows no topic `copy`).
 */
export async function submitThroughObject(
  call: LinkCall,
  conversationId: number,
  draft: SubmissionDraft & { requestId: string },
): Promise<number> {
  const answer = await callCopy(call, "submit", [conversationId, draft as unknown as Json]);
  return (answer as { submissionId: number }).submissionId;
}

/**
 * Decides tool call `callRef` (its call id or task id) through the object, keyed by `decision.decisionId`; resolves
 * with the holder's approval record. Rejects as `submitThroughObject` does, and with decide's own errors from the
 * holder (`AlreadyDecided` naming the first decision, `ApprovalWithdrawn`, `NoPendingApproval`, `NotFound`,
 * `ApprovalMismatch`); an object before decision 0097 answers `FollowMessageRefused` ("there is no call copy.decide").
 */
export async function decideThroughObject(
  call: LinkCall,
  conversationId: number,
  callRef: string | number,
  decision: Decision & { decisionId: string },
): Promise<ApprovalRecord> {
  const answer = await callCopy(call, "decide", [conversationId, callRef, decision as unknown as Json]);
  return (answer as { record: ApprovalRecord }).record;
}

/** Stops the conversation's run and compactions through the object; resolves once the object's copy shows them ended. */
export async function abortThroughObject(call: LinkCall, conversationId: number): Promise<void> {
  await callCopy(call, "abortConversation", [conversationId]);
}
