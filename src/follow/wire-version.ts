/**
 * The follow wire's version (docs/decisions/0046): the first call a tab makes on every connection is
 * `wire.hello(version)`, and nothing else goes out until the object answered it with the same version. A tab and a
 * Worker deployed apart then fail at once with one typed error naming both versions (`FollowVersionMismatch`),
 * never with a message the other side half understands.
 *
 * - An object of this release answers `{ version }` when the tab's is its own, `FollowVersionMismatch` otherwise.
 *   A tab from before the hello sends none: the object serves it as version 1, whose messages this release still
 *   takes (they differ only by `lease.acquire`'s optional third argument).
 * - A tab of this release that hears an error other than `FollowVersionMismatch` (an object before the hello
 *   refuses the unknown call as `FollowMessageRefused`) or another version fails with `FollowVersionMismatch`.
 */
import type { Json } from "../base/json.ts";
import { FollowVersionMismatch } from "../errors.ts";
import { args, type Check, integer, record } from "../shape.ts";

/**
 * This release's follow wire. Version 1 is the wire before versions (no `wire.hello`); 3 (decision 0051): `follow.from`
 * takes the tab's log tail as a third argument (an object of version 2 refuses it); 4 (decision 0053): a snapshot's
 * parts carry the whole's SHA-256, and the object tells a connected tab it fell behind its log (`behind`); 5 (decision
 * 0057): the object's pushes and its `follow.from` answer name the lease's holder (`holder`); 6 (decision 0079): a
 * snapshot's text is records, one a line (a header, one `[list, row]` a row, an end), cut into parts as they fill
 * and read record by record — a tab of 5 would take it for one JSON value and refuse it, so it meets a
 * `FollowVersionMismatch` at its hello instead, telling it to reload. Decision 0096's topic `copy` (a following tab's
 * submissions) needs no new version: an object without it refuses the call alone, typed (`FollowMessageRefused`,
 * "there is no call copy.submit"), and everything else on the link goes on; so do decision 0097's `copy.decide` and
 * `copy.abortConversation` against an object of 0096 (which knows only `copy.submit`), and decision 0101's
 * `lease.leaving` (a closing page's word, on a socket of its own) against an object before it.
 */
export const FOLLOW_WIRE_VERSION = 6;

/** The wire before versions: what a tab that says no hello speaks, and what an object that knows no hello is. */
export const UNVERSIONED_WIRE = 1;

/** The topic of the hello (a row of `FOLLOW_TOPICS`). */
export const WIRE_TOPIC = "wire";

/** `wire.hello(version)` → `{ version }`, called by the tab before anything else on a connection. */
export const WIRE = { calledBy: "tab" as const, methods: { hello: args([integer(1, 1_000_000)]) } };

const helloAnswer: Check = record({ version: integer(1, 1_000_000) });

/** The object's answer to `wire.hello(tabVersion)`: its version, or `FollowVersionMismatch` (thrown). */
export function answerHello(tabVersion: number): Json {
  if (tabVersion !== FOLLOW_WIRE_VERSION) throw new FollowVersionMismatch(tabVersion, FOLLOW_WIRE_VERSION);
  return { version: FOLLOW_WIRE_VERSION };
}

/**
 * What the tab makes of the object's answer to its hello: undefined when they speak the same version, otherwise
 * the mismatch (an error answer from an object that knows no hello is version 1; a malformed answer too).
 */
export function helloOutcome(answer: { value: Json } | { error: Error }): FollowVersionMismatch | undefined {
  if ("error" in answer) {
    const theirs = answer.error instanceof FollowVersionMismatch ? answer.error.object : undefined;
    return new FollowVersionMismatch(FOLLOW_WIRE_VERSION, Number.isSafeInteger(theirs) ? theirs! : UNVERSIONED_WIRE);
  }
  if (helloAnswer(answer.value, "the hello's answer")) return new FollowVersionMismatch(FOLLOW_WIRE_VERSION, UNVERSIONED_WIRE);
  const { version } = answer.value as { version: number };
  return version === FOLLOW_WIRE_VERSION ? undefined : new FollowVersionMismatch(FOLLOW_WIRE_VERSION, version);
}
