/**
 * The object's end of follow links (docs/decisions/0031), platform-neutral: the lease's arbiter (a `LeaseBook`
 * over the record the platform stores) and the copy of the tab's log, which takes the lease over at a release
 * or at the lease's expiry (`Arrival`, handover.ts). Every frame is checked (wire.ts) and every action asked
 * of `authorize` before it acts: pushing is a write power.
 *
 * - A lease call is answered once per request id (a duplicate gets the same answer).
 * - A push is applied only from the place that holds the lease under the push's epoch (else `StaleEpoch` or
 *   `LeaseNotHeld`, nothing applied), its parts joined first; answered with the copy's head.
 * - A release is taken over as after a crash (restarts counted, S4), and answered `taken`.
 * - While this place holds the lease, a tab that follows it (`follow.from`) is pushed what its harness stores
 *   (`Feed`, decision 0038) and answers with its head (`ack`).
 * - The object calls its tab too (`call`: forwarded writes, decision 0034), on the connection of the place that
 *   holds the lease (decision 0037), and hears the answer on any.
 */
import type { ServerCallRequest } from "../agent/server-port.ts";
import type { Json } from "../base/json.ts";
import { SerialQueue } from "../base/serial.ts";
import { NotAuthorized } from "../errors.ts";
import type { Harness } from "../harness.ts";
import { AnswerMemory } from "./answer-memory.ts";
import { MAX_OBJECT_TRANSACTION_BYTES, Reassembly } from "./chunks.ts";
import { Feed } from "./feed.ts";
import { historyWindow } from "./fork.ts";
import { Arrival, type HandOverMessage } from "./handover.ts";
import { holderOf, otherExpiry } from "./lease-holder.ts";
import { allowed, answerHelloCall, doorOf, errorShape, ownPlaceAnswer } from "./object-door.ts";
import type { FollowAuthorize, ObjectEndOptions, ObjectTopicHandler, SpeaksFor } from "./object-end-options.ts";
import { checkPusher, handBack, leaseCall } from "./object-lease.ts";
import { OutgoingCalls } from "./outgoing-calls.ts";
import { PAGE_CALLS, PageCallRelay } from "./page-call-relay.ts";
import { checkServerCallInCopy } from "./server-call-check.ts";
import { SERVER_TOOLS_TOPIC } from "./server-call-messages.ts";
import { admitServerCall } from "./server-calls.ts";
import { SnapshotServer } from "./snapshot.ts";
import { SnapshotAnswers } from "./snapshot-answers.ts";
import { Supersession } from "./superseded.ts";
import { HandBackSwitch, switchRefusal } from "./switch-answers.ts";
import { encodeFollowMessage, FOLLOW_TOPICS, joinPush, type ObjectMessage, parseFollowMessage } from "./wire.ts";
import { WIRE_TOPIC } from "./wire-version.ts";

export class ObjectEnd {
  readonly #options: ObjectEndOptions;
  readonly #arrival: Arrival;
  readonly #joining: Reassembly;
  readonly #remembered: AnswerMemory;
  readonly #handlers = new Map<string, ObjectTopicHandler>();
  readonly #line = new SerialQueue();
  /** The pushes to tabs that follow this place while it holds the lease (decision 0038). */
  readonly #feed: Feed;
  /** This object's calls of its tabs, waiting for their answers. */
  readonly #calls: OutgoingCalls;
  /** Snapshots of the copy for tabs that rebuild from it (decision 0047). */
  readonly #snapshots: SnapshotAnswers;
  /** The place each connection asked `follow.from` for or spoke for (the door's `place` for its page calls). */
  readonly #placeOf = new Map<unknown, string>();
  /** The connection that last spoke for each place, in this instance. */
  readonly #speakers = new Map<string, (frame: string) => void>();
  /** The harness that holds the lease here, once open. */
  #holder: Harness | undefined;
  /** This instance's hand-back and what follows it until the next instance: its switch (decisions 0130, 0139, 0145). */
  readonly #switch: HandBackSwitch;
  /** Whether another place took the lease from the harness open here: the platform is told once (decision 0149). */
  readonly #supersession: Supersession;
  /** Page tool calls a following tab makes of this place while it runs the conversation (decision 0044). */
  readonly #pageCalls = new PageCallRelay(
    "object",
    () => this.#holder,
    (connection, pages) => this.#options.claimedPages?.(connection, pages),
  );
  /** Where the arrival's messages go: the connection that spoke last. */
  #replyTo: ((frame: string) => void) | undefined;

  private constructor(options: ObjectEndOptions, arrival: Arrival, feed: Feed, snapshots: SnapshotServer) {
    this.#options = options;
    this.#switch = new HandBackSwitch(() => options.onSwitch?.());
    this.#supersession = new Supersession(options.onSuperseded && (() => options.onSuperseded?.()));
    this.#arrival = arrival;
    this.#feed = feed;
    this.#snapshots = new SnapshotAnswers(snapshots, options.place);
    // A storage with a row limit is a Durable Object's: what it holds of one transaction is bounded by its memory (its
    // log tail stores any size in rows under the limit, decision 0039).
    this.#joining = new Reassembly(options.storage.maxRowBytes === undefined ? undefined : MAX_OBJECT_TRANSACTION_BYTES);
    this.#calls = new OutgoingCalls(options.clock, options.newId);
    this.#remembered = new AnswerMemory(options.answers);
  }

  /**
   * Starts the object's end on its copy (at every start of the object): takes the lease at once when the record
   * says it is this place's or was released to it, otherwise follows and watches the lease's expiry.
   */
  static async start(options: ObjectEndOptions): Promise<ObjectEnd> {
    let end: ObjectEnd | undefined;
    let holder: Harness | undefined;
    const snapshots = new SnapshotServer(options.storage, options.clock, options.snapshotLimits, options.newId);
    const feed = new Feed({
      holds: () => snapshots.positions(), // a tab rebuilt from a snapshot follows from its position
      holder: () => holderOf(options.book.record, options.place), // decision 0057
      place: options.place,
      storage: options.storage,
      clock: options.clock,
      ...(options.keepLog === undefined ? {} : { keepLog: options.keepLog }),
      ...(options.roundBytes === undefined ? {} : { roundBytes: options.roundBytes }),
    });
    const arrival = await Arrival.start({
      place: options.place,
      storage: options.storage,
      arbiter: options.book,
      clock: options.clock,
      send: (message) => {
        if (end) end.#forward(message);
      },
      open: async (storage, lease) => {
        const harness = await options.open(storage, lease);
        // A read-only open holds nothing: never put back a harness handed back since (0149's review, M1).
        holder = harness.readOnly ? undefined : harness;
        if (holder) feed.attach(holder);
        if (end) end.#holder = holder;
        return harness;
      },
      ...(options.apply ? { apply: options.apply } : {}),
      ...(options.watchExpiry === false ? { watchExpiry: false } : {}),
    });
    end = new ObjectEnd(options, arrival, feed, snapshots);
    if (!holder) feed.hold(arrival.head); // what this copy wrote while it held the lease is still a tab's to follow
    end.#holder = holder;
    return end;
  }

  /**
   * Handing the lease back (its harness draining), or handed back with no harness open here since: its switch (decisions
   * 0130, 0135, 0139), where what its closing or closed host refuses `HarnessClosed` is `NotReady` (switch-answers.ts).
   */
  get switching(): boolean {
    return this.#switch.switching(this.#arrival.harness !== undefined);
  }

  /** The harness, once this place holds the lease. */
  get harness(): Promise<Harness> | undefined {
    return this.#arrival.harness;
  }

  /** The copy's head: its last applied position, or the harness's last stored one once this place holds the lease. */
  get head(): number {
    return this.#holder?.lease?.position ?? this.#arrival.head;
  }

  /** When the lease another place holds expires on this place's clock (for a platform's alarm), if it does. */
  get expiresAt(): number | undefined {
    return otherExpiry(this.#options.book.record, this.#options.place);
  }

  /** Takes the lease over if it expired (a platform's alarm calls this after an eviction); resolves when done. */
  checkExpiry(): Promise<void> {
    return this.#arrival.checkExpiry();
  }

  /** Serves the tab's calls of `topic` (one of the link's topics the tab calls). */
  serve(topic: string, handler: ObjectTopicHandler): void {
    this.#handlers.set(topic, handler);
  }

  /**
   * Calls `topic`'s `method` on the tab that holds the lease (or on `options.to`), on its connection; resolves with
   * its answer. `ConnectionLost` when no place other than this object holds the lease, when that place has no
   * open connection or it closes (`closed`), or without an answer in `timeoutMs`: the caller may call again (the
   * tab answers by what the call carries, a forwarded write's key, not by the call's id).
   */
  call(topic: string, method: string, args: Json[], options: { to?: string; timeoutMs?: number } = {}): Promise<Json> {
    const place = options.to ?? this.#options.book.record.holder;
    if (place === undefined || place === this.#options.place) return this.#calls.call("", undefined, { topic, method, args });
    const send = this.#options.connection?.(place) ?? this.#speakers.get(place);
    return this.#calls.call(place, send, { topic, method, args }, options.timeoutMs);
  }

  /** How many of this object's calls wait for an answer. */
  get pendingCalls(): number {
    return this.#calls.size;
  }

  /** A connection that spoke for `place` closed: this object's calls waiting on it are `ConnectionLost`. */
  closed(place: string): void {
    this.#speakers.delete(place);
    this.#calls.lost(place);
  }

  /**
   * A connection that followed this place before (its socket outlived the object's last instance, say): it is pushed
   * what the harness stores from now on, and its first `ack` says where it stands.
   */
  rejoin(connection: unknown, reply: (frame: string) => void, place?: string): void {
    if (place !== undefined) this.#placeOf.set(connection, place);
    this.#feed.rejoin(connection, reply);
  }

  /**
   * The pages that claimed page tool calls through `connection` in an earlier instance (kept by `claimedPages`): its
   * `releasePage` and its close release them here (decision 0051).
   */
  restorePages(connection: unknown, pages: readonly string[]): void {
    this.#pageCalls.restore(connection, pages);
  }

  /** Whether `connection` follows this place (asked `follow.from`, or rejoined). */
  follows(connection: unknown): boolean {
    return this.#feed.follows(connection);
  }

  /** The connection closed: nothing more is pushed to it, and the page tool calls claimed through it are released. */
  drop(connection: unknown): void {
    this.#feed.drop(connection);
    this.#placeOf.delete(connection);
    this.#pageCalls.dropped(connection);
  }

  /**
   * A frame from a tab's connection; `reply` sends to that connection; `authorize` is its caller's door.
   * `connection` names the connection for the pushes a following tab gets (default: `reply` itself); `speaksFor`
   * is told the place it speaks for (see `SpeaksFor`). `caller`, when the platform authenticated one, names it: the
   * snapshot limits count per caller rather than per place name the caller declares (decision 0064).
   */
  async receive(
    frame: unknown,
    reply: (frame: string) => void,
    authorize: FollowAuthorize,
    connection: unknown = reply,
    speaksFor?: SpeaksFor,
    caller?: string,
  ): Promise<void> {
    const parsed = parseFollowMessage(frame, "tab", this.#options.topics);
    if ("error" in parsed) {
      const error = errorShape(parsed.error);
      reply(
        encodeFollowMessage(
          parsed.id === undefined ? { type: "refused", head: this.head, error } : { type: "answer", id: parsed.id, error },
        ),
      );
      return;
    }
    const message = parsed.message;
    // An answer to this object's call: ids are random per instance, so a stranger's guess settles nothing.
    if (message.type === "answer") return this.#calls.answered(message);
    // The wire's version, a tab's first call on a connection (decision 0046): it tells nothing but the version, so no door.
    if (message.type === "call" && message.topic === WIRE_TOPIC)
      return reply(encodeFollowMessage(answerHelloCall(message.id, message.args)));
    // Only a caller with the write power (`push`) receives the tab's calls. Asked after a granted lease call: a hook that
    // fails there answers nothing (the lease call was answered; the next renewal asks again), as a refusal does — and the
    // app is told (`onAuthorizeError`, once per failed ask). A push frame's door has asked it already: not asked twice
    // (before: a second ask that failed left a push applied and its pusher unregistered; decision 0123).
    const spoke = async (place: string, admitted = false) => {
      if (!admitted && (await allowed(authorize, "push", place)) !== true) return;
      this.#speakers.set(place, reply);
      this.#placeOf.set(connection, place);
      speaksFor?.(place);
    };
    if (message.type === "call") {
      const { id, topic, method, args } = message;
      // The door first: a remembered answer is only for a caller that may make the call.
      const door = doorOf(topic, method, args, this.#placeOf.get(connection), this.#pageCalls);
      const admitted = await allowed(authorize, `${topic}.${method}`, door.place, door.request);
      if (admitted !== true) {
        reply(encodeFollowMessage({ type: "answer", id, error: errorShape(admitted) }));
        return;
      }
      if (topic === "follow")
        return method === "snapshot" ? this.#snapshots.answer(id, args, reply, caller) : this.#startFollowing(id, args, reply, connection);
      // Answered once per id (answer-memory.ts): a resend of a call still being answered queues no second answer. A call of a
      // keyed topic refused by the closed host in the switch is answered NotReady (0135; the link resends its keyed methods).
      const keyed = (this.#options.topics ?? FOLLOW_TOPICS)[topic]?.keyed !== undefined; // its topic's calls: NotReady
      return this.#remembered.answer(
        id,
        topic === "lease",
        reply,
        () =>
          this.#call(topic, method, args, connection, caller).then(
            (value): ObjectMessage => ({ type: "answer", id, value }),
            (error: unknown): ObjectMessage => ({
              type: "answer",
              id,
              error: errorShape(switchRefusal(error, keyed && this.switching, "call again, same key")),
            }),
          ),
        async (settled) => {
          // A page's `leaving` (decision 0101) comes on the page's own socket: the object's calls still go to its worker.
          if (topic === "lease" && method !== "release" && method !== "leaving" && "value" in settled) await spoke(String(args[0]));
        },
      );
    }
    if (message.type === "ack") {
      // A following tab's head (reading the log is the follow.from power): it has no answer — refused, or the hook failed
      // (the app told, as above), the ack is dropped as a lost one is (the feed's resend pushes again, the tab acks again).
      if ((await allowed(authorize, "follow.from")) === true) this.#feed.ack(connection, reply, message.head);
      return;
    }
    const admitted = await allowed(authorize, message.type, message.from);
    if (admitted !== true) {
      reply(encodeFollowMessage({ type: "refused", head: this.head, error: errorShape(admitted) }));
      return;
    }
    // One push or release at a time: each reads the copy's head and joins parts from there.
    await this.#line.run(async () => {
      this.#replyTo = reply;
      if (message.type === "release") return this.#arrival.receive(message);
      try {
        checkPusher(this.#options.book, this.#options.place, this.#arrival.harness !== undefined, message);
        // The pusher holds the lease: what a harness here writes is no longer this place's to push.
        if (this.#feed.attached) this.#feed.detach();
        await spoke(message.from, true);
        const batches = joinPush(message, this.head, this.#joining);
        await this.#arrival.receive({ type: "push", from: message.from, batches });
        // The pusher holds the lease (it follows no more); what it pushed goes on to the others that follow (decision 0090).
        this.#feed.drop(connection);
        this.#feed.relay(this.head, batches);
      } catch (error) {
        // Where this copy's log stands, for the pusher's fork (decision 0032): the newest stretches, bounded (decision 0051).
        const all = await this.#options.storage.readEpochs?.().catch(() => undefined);
        const epochs = all && historyWindow(all, 0, Number.MAX_SAFE_INTEGER);
        // The object between harnesses is no refusal of the pusher: NotReady, it pushes again (the resend skips what was
        // stored, by position); any other HarnessClosed stays final (decision 0130 and its review, M1).
        const refusal = switchRefusal(error, this.switching, "push again");
        this.#supersession.check(this.#holder, this.#options.book.record); // its harness's end lets the next take it (0149)
        reply(encodeFollowMessage({ type: "refused", head: this.head, error: errorShape(refusal), ...(epochs ? { epochs } : {}) }));
      }
    });
  }

  /**
   * `follow.from(place, head)`: answered with where the tab can start (this copy's history, the tail's reach), then
   * the connection is pushed from `head`. Asking again is harmless (the answer is read afresh, the feed restarts
   * there), so it is not remembered by id.
   */
  async #startFollowing(id: string, args: Json[], reply: (frame: string) => void, connection: unknown): Promise<void> {
    const [place, head, tail] = args as [string, number, number | undefined];
    if (place === this.#options.place) return reply(encodeFollowMessage(ownPlaceAnswer(id, place)));
    await this.#line.run(async () => {
      const start = await this.#feed.start(this.head, { from: Math.min(tail ?? 0, head), to: head });
      reply(encodeFollowMessage({ type: "answer", id, value: start as unknown as Json }));
      this.#feed.follow(connection, reply, head);
      this.#placeOf.set(connection, place); // the door allowed this caller follow.from for it
    });
  }

  /** `caller` (the authenticated caller's key, or else the connection) is who asks, for a handler that counts per caller. */
  async #call(topic: string, method: string, args: Json[], connection: unknown, caller: string | undefined): Promise<Json> {
    if (topic === PAGE_CALLS) return this.#pageCalls.call(method, args, connection);
    if (topic === "lease") {
      if (method === "handBack" && args[0] !== this.#options.place) return this.#handBack(String(args[0]), args[1] as number);
      const answer = await leaseCall({ book: this.#options.book, place: this.#options.place, head: this.head }, method, args);
      this.#supersession.check(this.#holder, this.#options.book.record); // a grant to another place (decision 0149)
      return answer;
    }
    const handler = this.#handlers.get(topic);
    if (!handler) throw new NotAuthorized(`${topic}.${method}`, "this object serves no such calls.");
    if (topic === SERVER_TOOLS_TOPIC) {
      // Decision 0051: the holder's epoch first (a superseded tab must hear that it lost the lease), then the call must
      // be one of the agent's own in this copy; otherwise nothing runs and nothing is stored.
      const request = args[0] as unknown as ServerCallRequest;
      admitServerCall(this.#options.book.record, this.#options.clock.now(), request);
      await checkServerCallInCopy(this.#options.storage, request);
    }
    return handler(method, args, caller === undefined ? connection : `caller:${caller}`);
  }

  /**
   * Hands the lease back to `place` (a tab that follows this one, at `head`): the harness drains (its running
   * phases joined, nothing more written) at position P, the lease is released there to `place` (reserved for it for
   * one lease's time), and this place follows again; the feed goes on pushing what the tab lacks up to P. Asked
   * again after that, it answers the same release. Resolves with `{ epoch, position: P }`.
   */
  async #handBack(place: string, head: number): Promise<Json> {
    return this.#line.run(() =>
      this.#switch.during(async (draining) => {
        const desk = { book: this.#options.book, place: this.#options.place, head: this.head };
        const handed = await handBack(desk, this.#holder, place, head, draining);
        if (handed.mark) {
          this.#holder = undefined;
          this.#switch.handed();
          this.#arrival.handedBack(handed.mark.position);
          this.#options.onHandedBack?.(handed.mark);
        }
        return { epoch: handed.epoch, position: handed.position };
      }),
    );
  }

  /** The arrival's hand-over messages, as the link's. */
  #forward(message: HandOverMessage): void {
    const reply = this.#replyTo;
    if (!reply) return;
    if (message.type === "ack") reply(encodeFollowMessage({ type: "ack", head: message.head, epoch: this.#options.book.record.epoch }));
    else if (message.type === "taken") reply(encodeFollowMessage({ type: "taken", epoch: message.epoch }));
  }
}
