/**
 * A following tab's writes, made through its object (decision 0096, issue 27 item 2): a tab on another device that
 * follows the object (its harness a read-only copy) sends its `submit` to the object over the follow link, topic
 * `copy` (`copy.submit(conversationId, draft)`, the draft carrying its `requestId`). The object answers it through
 * its copy service exactly as a page connected to it (`?edge=`): forwarded to the place that holds the lease under
 * the `requestId`, or made on the object's own host once it holds the lease. A resend under the same `requestId` is
 * answered with the same submission id and never carried out twice (the copy service and the holder both key it).
 *
 * What arrives is hostile: the frame's size and shape are the wire's (wire.ts), the arguments `PROTOCOL`'s row of
 * `submit` with its key required (`forwardedArgsProblem`), checked again by the handler; the door
 * (`follow.authorize`, action `copy.submit`) is told the place the connection follows and the conversation named.
 *
 * ```ts
 * end.serve(COPY, copyWrites(() => copy.service)); // the object
 * const id = await submitThroughObject(link.call.bind(link), conversationId, { ...draft, requestId }); // the tab
 * ```
 */
import type { SubmissionDraft } from "../agent/types.ts";
import type { Json } from "../base/json.ts";
import { FollowMessageRefused, InvalidArguments, NotAuthorized } from "../errors.ts";
import type { HarnessService } from "../host/protocol.ts";
import { type ArgsCheck, id, record } from "../shape.ts";
import { forwardedArgsProblem } from "./forwarding.ts";

/** The follow link's topic of a following tab's writes (its name in `FOLLOW_TOPICS`). */
export const COPY = "copy";

/** `copy.submit(conversationId, draft)` → `{ submissionId }`: the tab calls, the object answers. */
export const COPY_TOPIC: { calledBy: "tab"; methods: Record<string, ArgsCheck> } = {
  calledBy: "tab",
  methods: { submit: (values) => forwardedArgsProblem("submit", values) },
};

/** The object's answer, checked where it arrives (the tab). */
const submitted = record({ submissionId: id });

/**
 * The object's handler of topic `copy` (`ObjectEnd.serve(COPY, …)`): `service()` is what pages connected to the
 * object are served (its copy service, which forwards to the holder or answers on the object's own host).
 */
export function copyWrites(service: () => Pick<HarnessService, "submit">): (method: string, args: Json[]) => Promise<Json> {
  return async (method, args) => {
    if (method !== "submit") throw new NotAuthorized(`${COPY}.${method}`, "this object serves no such calls.");
    const problem = forwardedArgsProblem("submit", args);
    if (problem) throw new InvalidArguments(`${COPY}.submit`, problem);
    const [conversationId, draft] = args as unknown as [number, SubmissionDraft];
    return { submissionId: await service().submit(conversationId, draft) };
  };
}

/**
 * The tab's half: sends `draft` (with its `requestId`) to the object over `call` (the link's `FollowLink.call`);
 * resolves with the submission's id. Rejects with the object's error as its class (`NotAuthorized`,
 * `InvalidArguments`, `NotFound`, the holder's own), `ConnectionLost` when no answer came (send it again under the
 * same `requestId`), or `FollowMessageRefused` for an answer of the wrong shape (or an object before decision 0096,
 * which knows no topic `copy`).
 */
export async function submitThroughObject(
  call: (topic: string, method: string, args: Json[]) => Promise<Json>,
  conversationId: number,
  draft: SubmissionDraft & { requestId: string },
): Promise<number> {
  const answer: unknown = await call(COPY, "submit", [conversationId, draft as unknown as Json]);
  const problem = submitted(answer, "the object's answer to copy.submit");
  if (problem) throw new FollowMessageRefused("shape", problem);
  return (answer as { submissionId: number }).submissionId;
}
