/**
 * The actions a tab's follow link asks of its object's `follow.authorize` (decision 0107), for an app whose hook lists
 * actions by name. Allow a list whole rather than copying names: a new action of a later version (`lease.leaving`,
 * decision 0101, which a busy tab's close needs to hand over in time) then comes with it instead of being refused.
 */
import type { FollowAction } from "./object-end-options.ts";

/** What a device that only watches asks: where to follow from (and its head), and a snapshot for a new or lagging copy. */
export const WATCH_FOLLOW_ACTIONS = ["follow.from", "follow.snapshot"] as const satisfies readonly FollowAction[];

/** What a following tab's page writes through the object, to the holder (decisions 0096, 0097). */
export const COPY_FOLLOW_ACTIONS = ["copy.submit", "copy.decide", "copy.abortConversation"] as const satisfies readonly FollowAction[];

/**
 * Everything the user's own tab asks, on its worker's link and its page's leaving socket: the lease (take, renew, release,
 * say it is leaving, take it back), its pushes and release, its server tools and page tool calls, and all of the above.
 */
export const TAB_FOLLOW_ACTIONS = [
  "push",
  "release",
  "lease.acquire",
  "lease.renew",
  "lease.release",
  "lease.leaving",
  "lease.handBack",
  "server-tools.call",
  "page-calls.claimPageCall",
  "page-calls.answerPageCall",
  "page-calls.releasePage",
  ...WATCH_FOLLOW_ACTIONS,
  ...COPY_FOLLOW_ACTIONS,
] as const satisfies readonly FollowAction[];
