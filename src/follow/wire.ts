/**
 * The messages of a follow link between a tab and its conversation's Durable Object (docs/decisions/0031), as
 * JSON text frames, and the one check every frame passes before anything acts on it.
 *
 * - The tab pushes its stored transactions (`push`: coalesced, whole or in parts under the 2 MB limit, see
 *   chunks.ts) and, handing over, releases its lease at a position (`release`). The object answers each push
 *   with its copy's head (`ack`), or refuses it with a typed error and its head (`refused`: a stale epoch, a
 *   push it may not take), and says when it took the lease (`taken`).
 * - The other way (decision 0038), while the object holds the lease: a tab that follows it (`follow.from`) is pushed
 *   what the object's harness stores (`push`, the same message) and answers with its own head (`ack`).
 * - Calls, answered by their request id (a duplicate gets the same answer, never a second effect): topic
 *   `lease` (the tab asks the object, its arbiter: acquire, renew, release) and whatever topic another part
 *   adds to `FOLLOW_TOPICS` (forwarded submissions, server tool calls), in either direction as the topic says.
 *
 * ```ts
 * const parsed = parseFollowMessage(frame, "tab"); // a frame the tab sent, at the object
 * if ("error" in parsed) reply(parsed.error, parsed.id); // typed (an answer to call `id`, or `refused`), nothing applied
 * else handle(parsed.message);
 * ```
 */
import type { Json } from "../base/json.ts";
import { FollowMessageRefused } from "../errors.ts";
import type { ErrorShape } from "../host/protocol.ts";
import { MAX_DEPTH_LIMIT, utf8Length, walkJson } from "../limits.ts";
import { type ArgsCheck, args, type Check, flag, integer, list, literal, nullable, record, text, variant } from "../shape.ts";
import { batchProblem } from "./batch-shape.ts";
import { MAX_FOLLOW_MESSAGE_BYTES, MAX_PARTS, type PushLoad, type Reassembly } from "./chunks.ts";
import { COPY, COPY_TOPIC } from "./copy-writes.ts";
import { FORWARD, FORWARD_TOPIC } from "./forwarding.ts";
import type { LoggedBatch } from "./handover.ts";
import { DEVICE_PAGE_CALLS, DEVICE_PAGE_CALLS_TOPIC, PAGE_CALLS, PAGE_CALLS_TOPIC } from "./page-call-relay.ts";
import { SERVER_TOOLS, SERVER_TOOLS_TOPIC } from "./server-call-messages.ts";
import { WIRE, WIRE_TOPIC } from "./wire-version.ts";

/** Which end of a link a message comes from. */
export type FollowSide = "tab" | "object";

/**
 * The holder's stored transactions (`from`: its place; `epoch`: the lease it writes under): the tab's to the object's
 * copy, or the object's to a tab that follows it (decision 0038).
 */
export interface PushMessage extends PushLoad {
  type: "push";
  from: string;
  epoch: number;
  /** From the object only: who holds the lease now, by the object's own lease record (decision 0057). */
  holder?: LeaseHolder;
}
/**
 * Who holds the lease, as the object's `LeaseBook` records it (decision 0057): a place it granted the lease through
 * its door, never a tab's own claim; `object` when that place is the object itself. Absent: the lease is free.
 */
export interface LeaseHolder {
  place: string;
  object: boolean;
}
/**
 * The copy holds the log up to `head` (whose epoch is `epoch`): from the object, what the tab may trim and count as
 * safe; from a following tab, where the object's next push to it starts (a gap there: the tab's head).
 */
export interface AckMessage {
  type: "ack";
  head: number;
  epoch: number;
}
/**
 * A push the object did not apply (any of it), why, and where its copy stands: its head and, for a push it
 * refused, where each epoch's stretch of its log begins (a fenced tab finds its fork from them, decision 0032).
 */
export interface RefusedMessage {
  type: "refused";
  head: number;
  error: ErrorShape;
  epochs?: Array<{ epoch: number; start: number }>;
}
/**
 * To a tab that follows: the object's log no longer holds what it lacks after its head (it fell behind what the
 * tail keeps while connected, decision 0053); `after` is the earliest head the tail can push from. The tab asks
 * `follow.from` again, is told it is behind, and rebuilds from the object's snapshot.
 */
export interface BehindMessage {
  type: "behind";
  after: number;
}
/** The tab gives up lease `epoch` at `position` (the hand-over: everything up to it was acknowledged). */
export interface ReleaseMessage {
  type: "release";
  from: string;
  epoch: number;
  position: number;
}
/** The object holds the lease now, under `epoch`. */
export interface TakenMessage {
  type: "taken";
  epoch: number;
}
/** A call of `topic`'s `method`; the receiver answers it once per `id` (a duplicate gets the same answer). */
export interface CallMessage {
  type: "call";
  id: string;
  topic: string;
  method: string;
  args: Json[];
}
/** The answer to call `id`: its value, or the error it failed with. */
export type AnswerMessage = { type: "answer"; id: string; value: Json } | { type: "answer"; id: string; error: ErrorShape };

export type TabMessage = PushMessage | ReleaseMessage | AckMessage | CallMessage | AnswerMessage;
export type ObjectMessage = AckMessage | RefusedMessage | TakenMessage | PushMessage | BehindMessage | CallMessage | AnswerMessage;
export type FollowMessage = TabMessage | ObjectMessage;

/** A topic's calls: which side calls them, and each method's argument check. */
export interface FollowTopic {
  calledBy: FollowSide;
  methods: Record<string, ArgsCheck>;
  /** Methods made once per a key in their arguments: sent again under a new id on `NotReady` (0135; per method, not an
   * abort, which stops what runs when it lands: review of 0135, H1). The topic's other calls end `NotReady` at once. */
  keyed?: readonly string[];
}

/** A place's name, an epoch, a position. */
const place = text({ max: 200 });
const epoch = integer(1, Number.MAX_SAFE_INTEGER);
const position = integer(0, Number.MAX_SAFE_INTEGER);

/**
 * The calls of the link by topic. `lease`: the tab asks the object's `LeaseBook` (`acquire(place, head, epoch?)` →
 * `LeaseGrant`; `renew(place, epoch)` → `LeaseGrant`; `release(place, epoch, position, heir?)` → null; `leaving`;
 * `handBack(place, head)` → `HandBack`, decision 0038).
 * Other parts add their topic here (one table: what may cross, in which direction, with which arguments).
 */
export const FOLLOW_TOPICS: Readonly<Record<string, FollowTopic>> = {
  // The first call on every connection: the wire's version (decision 0046, wire-version.ts).
  [WIRE_TOPIC]: WIRE,
  lease: {
    calledBy: "tab",
    methods: {
      acquire: args([place, position], [epoch]),
      renew: args([place, epoch]),
      release: args([place, epoch, position], [place]),
      // The tab asks for the lease back (decision 0038): → `HandBack`, the position the object released it at.
      handBack: args([place, position]),
      // The holder's page at `pagehide` (decision 0101): `leaving(place, epoch, position)` → null; its lease ends a grace later.
      leaving: args([place, epoch, position]),
    },
  },
  // A tab that does not hold the lease follows the object's log from its own head (decision 0038):
  // `from(place, head, tail?)` → the object's `FollowStart`; the object then pushes to that connection. `tail`: the
  // first position of the tab's log tail (default 0), so the answer carries only the epoch stretches that cover
  // [tail, head] (decision 0051: after tens of thousands of takeovers all of them pass the 1 MB frame).
  // `snapshot(place, id?, index?)` → a `SnapshotPart` of the object's copy (decision 0047): without an id, a new
  // snapshot's first part; with one, its part `index`. A tab that cannot follow the log rebuilds from it.
  follow: {
    calledBy: "tab",
    methods: { from: args([place, position], [position]), snapshot: args([place], [text({ max: 100 }), integer(0, MAX_PARTS - 1)]) },
  },
  // Writes a device made at the object's copy, made by the tab that holds the lease (decision 0034).
  [FORWARD]: FORWARD_TOPIC,
  // Server tools' calls: the tab asks the object to run one, `call(request)` → `ServerCallAnswer` (decision 0036).
  [SERVER_TOOLS_TOPIC]: SERVER_TOOLS,
  // Page tool calls of a tab that follows the object while the object runs (decision 0044): the tab claims, answers
  // and releases them at the object, which makes them in the harness that holds the lease.
  [PAGE_CALLS]: PAGE_CALLS_TOPIC,
  // The other way: a device's page at the object's copy claims the tab's page calls while the tab holds the lease.
  [DEVICE_PAGE_CALLS]: DEVICE_PAGE_CALLS_TOPIC,
  // A following tab's own writes, made through the object as a page connected to it makes them (decisions 0096, 0097).
  [COPY]: COPY_TOPIC,
};

/**
 * The object's answer to `lease.handBack`: it stopped writing at `position` (its harness drained) and released
 * `epoch` there to the asking tab, which may take the lease once its copy holds the log up to `position`.
 */
export interface HandBack {
  epoch: number;
  position: number;
}

/** Checks the object's `lease.handBack` answer where it arrives (the tab). */
export const handBack: Check = record({ epoch, position });

/** A request id: the caller's own, unique among its calls (a duplicate is the same call). */
export const MAX_REQUEST_ID = 100;
/** Messages nest at most this deep: a stored value's own depth (`MAX_DEPTH_LIMIT`) below the few levels of a push. */
export const MAX_FOLLOW_DEPTH = MAX_DEPTH_LIMIT + 16;

const requestId = text({ max: MAX_REQUEST_ID });
const errorShape: Check = record(
  { name: text({ max: 200 }), message: text({ empty: true, max: 20_000 }) },
  {
    details: (value, path) =>
      typeof value === "object" && value !== null && !Array.isArray(value) ? undefined : `${path} must be an object`,
    stack: text({ empty: true, max: 20_000 }),
  },
);
const anyJson: Check = () => undefined; // the whole frame was walked as JSON within its bounds first
const jsonList: Check = (value, path) => (Array.isArray(value) ? undefined : `${path} must be an array`);
const part: Check = record({
  epoch,
  position: integer(1, Number.MAX_SAFE_INTEGER),
  index: integer(0, MAX_PARTS - 1),
  count: integer(1, MAX_PARTS),
  text: text({ empty: true }),
});
const batch: Check = (value, path) => batchProblem(value, path);

const pushFields = {
  type: literal("push"),
  from: place,
  epoch,
  batches: list(batch, 100_000),
  parts: list(part, MAX_PARTS),
};
const push = record(pushFields);
/** A lease holder's shape (decision 0057): `place` 1–200 characters, `object` a boolean, nothing else. */
export const leaseHolder: Check = record({ place, object: flag });
const holder = leaseHolder;
const ack = record({ type: literal("ack"), head: position, epoch: integer(0, Number.MAX_SAFE_INTEGER) });

const call = record({ type: literal("call"), id: requestId, topic: text({ max: 100 }), method: text({ max: 100 }), args: jsonList });
const answer = either2(
  record({ type: literal("answer"), id: requestId, value: anyJson }),
  record({ type: literal("answer"), id: requestId, error: errorShape }),
);

const SHAPES: Record<FollowSide, Record<string, Check>> = {
  tab: {
    push,
    release: record({ type: literal("release"), from: place, epoch, position }),
    ack,
    call,
    answer,
  },
  object: {
    ack,
    push: record(pushFields, { holder }),
    refused: record(
      { type: literal("refused"), head: position, error: errorShape },
      { epochs: list(record({ epoch, start: integer(1, Number.MAX_SAFE_INTEGER) }), 100_000) },
    ),
    taken: record({ type: literal("taken"), epoch }),
    behind: record({ type: literal("behind"), after: position }),
    call,
    answer,
  },
};

/** An answer has a value or an error: the first shape's problem unless the value has `error`. */
function either2(withValue: Check, withError: Check): Check {
  return (value, path) => {
    const fields = typeof value === "object" && value !== null ? (value as Record<string, unknown>) : {};
    return Object.hasOwn(fields, "error") ? withError(value, path) : withValue(value, path);
  };
}

export type Parsed<M> = { message: M } | { error: FollowMessageRefused; id?: string };

/**
 * Checks a frame `from` one side, before anything acts on it: at most `MAX_FOLLOW_MESSAGE_BYTES` (UTF-8), JSON,
 * nested at most `MAX_FOLLOW_DEPTH`, one of that side's messages, each pushed transaction a `LoggedBatch`, each
 * call one of its topic's methods with its arguments, called by that side. Refused: `FollowMessageRefused`
 * (with the call's id, when there was one to answer).
 */
export function parseFollowMessage(frame: unknown, from: "tab", topics?: Readonly<Record<string, FollowTopic>>): Parsed<TabMessage>;
export function parseFollowMessage(frame: unknown, from: "object", topics?: Readonly<Record<string, FollowTopic>>): Parsed<ObjectMessage>;
export function parseFollowMessage(
  frame: unknown,
  from: FollowSide,
  topics: Readonly<Record<string, FollowTopic>> = FOLLOW_TOPICS,
): Parsed<FollowMessage> {
  if (typeof frame !== "string") return refuse("shape", "a frame must be JSON text");
  if (
    frame.length > MAX_FOLLOW_MESSAGE_BYTES ||
    (frame.length * 3 > MAX_FOLLOW_MESSAGE_BYTES && utf8Length(frame) > MAX_FOLLOW_MESSAGE_BYTES)
  )
    return refuse("size", `a frame is at most ${MAX_FOLLOW_MESSAGE_BYTES} bytes`);
  let value: unknown;
  try {
    value = JSON.parse(frame);
  } catch {
    return refuse("json", "a frame was not JSON");
  }
  const bounded = jsonFault(value, MAX_FOLLOW_DEPTH);
  if (bounded) return bounded;
  const problem = variant("type", SHAPES[from])(value, "the message");
  const id = callId(value);
  if (problem) return refuse("shape", problem, id);
  const message = value as FollowMessage;
  if (message.type === "call") {
    const topic = Object.hasOwn(topics, message.topic) ? topics[message.topic] : undefined;
    const check = topic && Object.hasOwn(topic.methods, message.method) ? topic.methods[message.method] : undefined;
    if (!topic || !check) return refuse("shape", `there is no call ${message.topic}.${message.method}`, id);
    if (topic.calledBy !== from) return refuse("shape", `${message.topic} calls are the ${topic.calledBy}'s to make`, id);
    const wrong = check(message.args);
    if (wrong) return refuse("shape", `${message.topic}.${message.method}: ${wrong}`, id);
  }
  return { message };
}

/**
 * One transaction joined from its parts (chunks.ts `Reassembly`), checked as a pushed one is; `expected` is the
 * place in the log its parts named. `FollowMessageRefused` when it is not that transaction.
 */
export function parseJoinedBatch(joined: string, expected: { epoch: number; position: number }): LoggedBatch {
  let value: unknown;
  try {
    value = JSON.parse(joined);
  } catch {
    throw new FollowMessageRefused("json", `the parts of log position ${expected.position} do not join into JSON`);
  }
  const bounded = jsonFault(value, MAX_FOLLOW_DEPTH);
  if (bounded) throw bounded.error;
  const problem = batchProblem(value, `the transaction at log position ${expected.position}`);
  if (problem) throw new FollowMessageRefused("shape", problem);
  const batch = value as LoggedBatch;
  if (batch.fence.epoch !== expected.epoch || batch.fence.position !== expected.position)
    throw new FollowMessageRefused("shape", `the parts of log position ${expected.position} join into position ${batch.fence.position}`);
  return batch;
}

/**
 * The object's answer to `follow.from` (decision 0038): its log as a history (head and epochs' starts, for
 * `continuesHistory`) and `after`, the earliest head it can push from (its durable tail keeps the log after it; a
 * copy further behind is rebuilt from the object's snapshot instead).
 */
export interface FollowStart {
  head: { epoch: number; position: number } | null;
  epochs: Array<{ epoch: number; start: number }>;
  after: number;
  /** Who holds the lease now (decision 0057; absent: free, or an object before wire version 5). */
  holder?: LeaseHolder;
}

/** Checks the object's `follow.from` answer where it arrives (the tab): `undefined` or what is wrong. */
export const followStart: Check = record(
  {
    head: nullable(record({ epoch, position })),
    epochs: list(record({ epoch, start: integer(1, Number.MAX_SAFE_INTEGER) }), 100_000),
    after: position,
  },
  { holder },
);

/**
 * A push's transactions in log order from `head` + 1, as far as they continue it: whole ones, and any joined
 * from their parts (`joining` holds the parts of the one transaction needed next). `FollowMessageRefused` for
 * parts that do not join into the transaction they name.
 */
export function joinPush(push: PushLoad, head: number, joining: Reassembly): LoggedBatch[] {
  const out: LoggedBatch[] = [];
  let next = head + 1;
  const whole = new Map(push.batches.map((batch) => [batch.fence.position, batch]));
  const parts = [...push.parts].sort((a, b) => a.position - b.position || a.index - b.index);
  for (;;) {
    const batch = whole.get(next);
    if (batch) {
      out.push(batch);
      next++;
      continue;
    }
    let joined: LoggedBatch | undefined;
    for (const part of parts) {
      if (part.position !== next) continue;
      const text = joining.add(part, next - 1);
      if (text !== undefined) joined = parseJoinedBatch(text, part);
    }
    if (!joined) break;
    out.push(joined);
    next++;
  }
  return out;
}

/** The frame of `message`. */
export function encodeFollowMessage(message: FollowMessage): string {
  return JSON.stringify(message);
}

function refuse(reason: FollowMessageRefused["reason"], detail: string, id?: string): { error: FollowMessageRefused; id?: string } {
  const error = new FollowMessageRefused(reason, detail);
  return id === undefined ? { error } : { error, id };
}

/** A parsed value that is not plain JSON within `maxDepth` (JSON.parse gives plain JSON: only depth can fail). */
function jsonFault(value: unknown, maxDepth: number): { error: FollowMessageRefused } | undefined {
  const { fault } = walkJson(value, { maxDepth });
  if (!fault) return undefined;
  return fault.kind === "depth"
    ? { error: new FollowMessageRefused("depth", `it nests deeper than ${maxDepth} levels`) }
    : { error: new FollowMessageRefused("json", `it holds ${fault.kind}`) };
}

/** The id of a call in a refused message, so the refusal can answer it. */
function callId(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const { type, id } = value as { type?: unknown; id?: unknown };
  return type === "call" && typeof id === "string" && id.length <= MAX_REQUEST_ID ? id : undefined;
}
