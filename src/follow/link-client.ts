/**
 * The tab's end of a follow link (docs/decisions/0031), over any transport that carries text frames and says
 * when it is up: calls to the object answered by request id (sent again on every reconnect and every
 * `resendMs` until answered — a duplicate is harmless: the object answers an id once; a keyed call the object answers
 * `NotReady` in its switch goes again under a new id for a bounded time, decision 0135), calls from the object
 * served once per id, the object's replies to pushes handed to whoever listens (the mirror), and the object's own
 * pushes to a tab that follows it (the follower, decision 0038). On every connection the link first says the wire's
 * version (`wire.hello`, decision 0046) and sends nothing else until the object answered with the same one; an
 * object of another version fails every call with `FollowVersionMismatch`, naming both.
 *
 * ```ts
 * const link = new FollowLink({ clock, send: (frame) => socket.send(frame) });
 * socket.addEventListener("open", () => link.connected());
 * socket.addEventListener("close", () => link.disconnected());
 * socket.addEventListener("message", (event) => link.receive(String(event.data)));
 * ```
 */
import type { Clock } from "../base/clock.ts";
import { type IdSource, randomIds } from "../base/ids.ts";
import type { Json } from "../base/json.ts";
import { ConnectionLost, type FollowVersionMismatch, HarnessClosed, NotReady, UnknownMethod } from "../errors.ts";
import { deserializeError, serializeError } from "../host/error-wire.ts";
import { utf8Length } from "../limits.ts";
import { DEFAULT_LEASE_TTL_MS } from "./arbiter.ts";
import {
  type AckMessage,
  encodeFollowMessage,
  FOLLOW_TOPICS,
  type FollowTopic,
  type PushMessage,
  parseFollowMessage,
  type RefusedMessage,
  type TabMessage,
  type TakenMessage,
} from "./wire.ts";
import { FOLLOW_WIRE_VERSION, helloOutcome, WIRE_TOPIC } from "./wire-version.ts";

/** The object's replies to what the tab pushed and released. */
export type PushReply = AckMessage | RefusedMessage | TakenMessage;

/** Serves calls of one topic the object makes (forwarded submissions, say). */
export type TopicHandler = (method: string, args: Json[]) => Promise<Json> | Json;

export interface FollowLinkOptions {
  clock: Clock;
  /** Sends a frame; a throw counts as a frame lost (the link sends again when it is up). */
  send(frame: string): void;
  /** How often an unanswered call is sent again while the link is up. Default 2,000 ms. */
  resendMs?: number;
  /** A call unanswered this long rejects with `ConnectionLost`. Default 15,000 ms. */
  callTimeoutMs?: number;
  /** The link's topics (default `FOLLOW_TOPICS`): what the object may call and the tab may answer. */
  topics?: Readonly<Record<string, FollowTopic>>;
  /** Told of a frame from the object that was refused (it is dropped). */
  onRefused?(error: Error): void;
  /** Told when the object speaks another version of the wire (every call fails with it until a reconnect). */
  onMismatch?(error: FollowVersionMismatch): void;
  /** The random part of this link's call ids, drawn once (decision 0078). Default `randomIds`. */
  newId?: IdSource;
  /**
   * A keyed call (`FollowTopic.keyed`) the object answers `NotReady` (its switch between harnesses, decision 0135) is
   * sent again under a new id at the next resend, for this long from its first `NotReady` on this clock; then it rejects
   * with that `NotReady`. Default one lease's time (`DEFAULT_LEASE_TTL_MS`): by then the object's next instance serves it.
   */
  notReadyPassesMs?: number;
}

/** What the link did, for observing it. */
export interface FollowLinkStats {
  /** Keyed calls sent again after the object answered them `NotReady` (decision 0135). */
  notReadyRetries: number;
}

interface Pending {
  frame: string;
  resolve(value: Json): void;
  reject(error: unknown): void;
  cancelTimeout(): void;
  /** The call's frame under another id, for a keyed call (sent again after `NotReady`). */
  again?(id: string): string;
  /** When this call's first `NotReady` came (this clock). */
  notReadySince?: number;
}

/** Answers remembered for calls from the object, so a duplicate gets the same answer. */
const REMEMBERED_ANSWERS = 256;

export class FollowLink {
  readonly #options: FollowLinkOptions;
  readonly #pending = new Map<string, Pending>();
  readonly #handlers = new Map<string, TopicHandler>();
  readonly #answered = new Map<string, Promise<string>>();
  readonly #replyListeners = new Set<(reply: PushReply) => void>();
  readonly #pushListeners = new Set<(push: PushMessage) => void>();
  readonly #upListeners = new Set<() => void>();
  readonly #behindListeners = new Set<(after: number) => void>();
  readonly #prefix: string;
  #next = 0;
  /** The transport is up and the object answered the hello with this link's version. */
  #up = false;
  #transport = false;
  /** The id of this connection's hello while it waits for its answer. */
  #hello: string | undefined;
  /** The object's wire is another version (this connection's hello said so). */
  #mismatch: FollowVersionMismatch | undefined;
  #cancelResend: (() => void) | undefined;
  /** Closed for good (`close()`): nothing is sent or asked again. */
  #closed = false;
  readonly stats: FollowLinkStats = { notReadyRetries: 0 };

  constructor(options: FollowLinkOptions) {
    this.#options = options;
    this.#prefix = (options.newId ?? randomIds)();
  }

  /** Whether the link is up: its transport is (between `connected()` and `disconnected()`) and the hello answered. */
  get up(): boolean {
    return this.#up;
  }

  /** The object's wire version differs from this link's, as this connection's hello found. */
  get mismatch(): FollowVersionMismatch | undefined {
    return this.#mismatch;
  }

  /**
   * The transport is up: the hello goes first; once the object answered it, unanswered calls go again and listeners
   * (the mirror) push what is unacknowledged.
   */
  connected(): void {
    if (this.#closed) return;
    this.#transport = true;
    this.#mismatch = undefined;
    this.#hello = `${this.#prefix}:hello:${++this.#next}`;
    this.#sendHello();
    this.#armResend();
  }

  /**
   * Closed for good (its worker's host closed, decision 0133): down, no timer left, every call still waiting rejected
   * `HarnessClosed`, and nothing sent or asked from now on (a call rejects at once; `connected()` does nothing).
   */
  close(): void {
    this.#closed = true;
    this.disconnected();
    for (const [id, pending] of this.#pending) {
      this.#pending.delete(id);
      pending.cancelTimeout();
      pending.reject(new HarnessClosed("The follow link"));
    }
  }

  /** The transport is down: nothing is sent until `connected()`. */
  disconnected(): void {
    this.#up = false;
    this.#transport = false;
    this.#hello = undefined;
    this.#cancelResend?.();
    this.#cancelResend = undefined;
  }

  /**
   * Sends `message` now if the link is up (a push or a release: their senders repeat them until answered).
   * Returns the frame's UTF-8 bytes, or 0 when it was not sent.
   */
  send(message: TabMessage): number {
    return this.#up ? this.sendEncoded(encodeFollowMessage(message)) : 0;
  }

  /**
   * `send` of a message already encoded (`encodeFollowMessage`'s text, as `textFrames` makes a push's from its log
   * texts, decision 0093); `bytes`, its UTF-8 bytes when the caller counted them. Returns the frame's UTF-8 bytes, or
   * 0 when it was not sent.
   */
  sendEncoded(frame: string, bytes?: number): number {
    if (!this.#up) return 0;
    return this.#sendFrame(frame) ? (bytes ?? utf8Length(frame)) : 0;
  }

  /** Calls `topic`'s `method` on the object; resolves with its answer (rejects with its error, as its class). */
  call(topic: string, method: string, args: Json[]): Promise<Json> {
    if (this.#mismatch) return Promise.reject(this.#mismatch);
    if (this.#closed) return Promise.reject(new HarnessClosed("The follow link"));
    const id = `${this.#prefix}:${++this.#next}`;
    const again = (id: string) => encodeFollowMessage({ type: "call", id, topic, method, args });
    const keyed = (this.#options.topics ?? FOLLOW_TOPICS)[topic]?.keyed?.includes(method) === true;
    return new Promise<Json>((resolve, reject) => {
      const pending: Pending = { frame: again(id), resolve, reject, cancelTimeout: () => {}, ...(keyed ? { again } : {}) };
      this.#wait(id, pending);
      if (this.#up) this.#sendFrame(pending.frame);
    });
  }

  /** `pending` waits under `id`, at most `callTimeoutMs` for an answer (then `ConnectionLost`). */
  #wait(id: string, pending: Pending): void {
    pending.cancelTimeout = this.#options.clock.setTimer(this.#options.callTimeoutMs ?? 15_000, () => {
      if (this.#pending.get(id) === pending && this.#pending.delete(id)) pending.reject(new ConnectionLost());
    });
    this.#pending.set(id, pending);
  }

  /**
   * A keyed call answered `NotReady` (the object between its harnesses, decision 0135) waits again under a new id (the
   * object remembers its answer by id), sent at the next resend; true when it does. Not after `notReadyPassesMs` from
   * its first one: a closed link, or an object that stays so, ends the call.
   */
  #again(pending: Pending, error: Error): boolean {
    if (!(error instanceof NotReady) || !pending.again || this.#closed) return false;
    const now = this.#options.clock.now();
    pending.notReadySince ??= now;
    if (now - pending.notReadySince >= (this.#options.notReadyPassesMs ?? DEFAULT_LEASE_TTL_MS)) return false;
    const id = `${this.#prefix}:${++this.#next}`;
    pending.frame = pending.again(id);
    this.#wait(id, pending);
    this.stats.notReadyRetries++;
    return true;
  }

  /** Serves the object's calls of `topic` (the topic must be one the object calls, in the link's topics). */
  serve(topic: string, handler: TopicHandler): void {
    this.#handlers.set(topic, handler);
  }

  /** Hears the object's replies to pushes and releases. Returns the function that stops listening. */
  onReply(listener: (reply: PushReply) => void): () => void {
    this.#replyListeners.add(listener);
    return () => this.#replyListeners.delete(listener);
  }

  /** Hears the object's pushes to a tab that follows it (decision 0038). Returns the function that stops listening. */
  onPush(listener: (push: PushMessage) => void): () => void {
    this.#pushListeners.add(listener);
    return () => this.#pushListeners.delete(listener);
  }

  /**
   * Hears the object say this tab fell behind what its log keeps (decision 0053): the follower asks where to start
   * again. Returns the function that stops listening.
   */
  onBehind(listener: (after: number) => void): () => void {
    this.#behindListeners.add(listener);
    return () => this.#behindListeners.delete(listener);
  }

  /** Hears the link come up (each connection whose hello the object answered). Returns the function that stops listening. */
  onConnected(listener: () => void): () => void {
    this.#upListeners.add(listener);
    return () => this.#upListeners.delete(listener);
  }

  /** A frame from the object: checked (wire.ts), then an answer, a call, or a reply to a push. */
  receive(frame: unknown): void {
    const parsed = parseFollowMessage(frame, "object", this.#options.topics);
    if ("error" in parsed) {
      if (parsed.id !== undefined)
        this.#sendFrame(encodeFollowMessage({ type: "answer", id: parsed.id, error: serializeError(parsed.error) }));
      this.#options.onRefused?.(parsed.error);
      return;
    }
    const message = parsed.message;
    if (message.type === "answer") {
      if (message.id === this.#hello) {
        this.#helloAnswered("error" in message ? { error: deserializeError(message.error) } : message);
        return;
      }
      const pending = this.#pending.get(message.id);
      if (!pending) return; // answered already (a duplicate), or timed out
      this.#pending.delete(message.id);
      pending.cancelTimeout();
      if ("error" in message) {
        const error = deserializeError(message.error);
        if (!this.#again(pending, error)) pending.reject(error);
      } else pending.resolve(message.value);
      return;
    }
    if (message.type === "call") {
      void this.#answer(message.id, message.topic, message.method, message.args);
      return;
    }
    if (message.type === "push") {
      for (const listener of this.#pushListeners) listener(message);
      return;
    }
    if (message.type === "behind") {
      for (const listener of this.#behindListeners) listener(message.after);
      return;
    }
    for (const listener of this.#replyListeners) listener(message);
  }

  async #answer(id: string, topic: string, method: string, args: Json[]): Promise<void> {
    let answer = this.#answered.get(id);
    if (!answer) {
      const handler = this.#handlers.get(topic);
      answer = (async () => {
        try {
          if (!handler) throw new UnknownMethod(`${topic}.${method}`);
          return encodeFollowMessage({ type: "answer", id, value: (await handler(method, args)) ?? null });
        } catch (error) {
          return encodeFollowMessage({ type: "answer", id, error: serializeError(error) });
        }
      })();
      this.#answered.set(id, answer);
      if (this.#answered.size > REMEMBERED_ANSWERS) this.#answered.delete(this.#answered.keys().next().value!);
    }
    this.#sendFrame(await answer);
  }

  #sendHello(): void {
    if (this.#hello)
      this.#sendFrame(
        encodeFollowMessage({ type: "call", id: this.#hello, topic: WIRE_TOPIC, method: "hello", args: [FOLLOW_WIRE_VERSION] }),
      );
  }

  /** The object answered this connection's hello: the link is up, or every call fails with the mismatch. */
  #helloAnswered(answer: { value: Json } | { error: Error }): void {
    this.#hello = undefined;
    const mismatch = helloOutcome(answer);
    if (mismatch) {
      this.#mismatch = mismatch;
      for (const [id, pending] of this.#pending) {
        this.#pending.delete(id);
        pending.cancelTimeout();
        pending.reject(mismatch);
      }
      this.#options.onMismatch?.(mismatch);
      return;
    }
    this.#up = true;
    for (const pending of [...this.#pending.values()]) this.#sendFrame(pending.frame);
    for (const listener of this.#upListeners) listener();
  }

  #sendFrame(frame: string): boolean {
    if (this.#closed) return false; // an answer computed before the close
    try {
      this.#options.send(frame);
      return true;
    } catch {
      return false;
    }
  }

  #armResend(): void {
    this.#cancelResend?.();
    this.#cancelResend = this.#options.clock.setTimer(this.#options.resendMs ?? 2_000, () => {
      if (!this.#transport || this.#mismatch) return;
      if (this.#hello) this.#sendHello();
      // A copy: a call answered `NotReady` at once waits under a new id, sent at the next resend, not again in this loop.
      else for (const pending of [...this.#pending.values()]) this.#sendFrame(pending.frame);
      this.#armResend();
    });
  }
}
