/**
 * The page's own word that it is leaving (decision 0101). A closing tab's worker often never gets the task that would
 * send its release (Chromium stops it with its page; decision 0100 counted 11 of 20 closes handed over when the worker
 * ran 50 ms synchronous stretches), while the page's own socket send at `pagehide` arrived 70 of 70. So the page
 * holds a follow socket of its own to the object, at the address its worker tells it once it holds the lease (the
 * worker's own, token included: the same door, no new one), says the wire's hello on it, and keeps the worker's last
 * word of where the object stands (`LeavingTicket`: the epoch, the acknowledged head A). At `pagehide`, before it
 * posts `leave` to its worker, it sends `lease.leaving(place, epoch, A)` there. The object keeps the lease the tab's
 * for a grace in which the worker's own release wins, and takes it over as after a crash after it.
 */
import { encodeFollowMessage, parseFollowMessage } from "../follow/wire.ts";
import { FOLLOW_WIRE_VERSION, helloOutcome, WIRE_TOPIC } from "../follow/wire-version.ts";
import type { LeavingTicket, TabFollow } from "./follow-options.ts";
import type { SocketLike } from "./socket.ts";

/** The key of the worker's message to its page that carries the ticket (`null`: it holds no lease now). */
export const LEAVING_TICKET = "pi-durable-web:leaving";

/**
 * The key of the page's message to its worker that it said `lease.leaving` (decision 0113): `{ epoch, at }`, `at` the
 * page's `Date.now()` read before the send, so the worker stops writing a grace after it, before the object may take over.
 */
export const LEAVING_SAID = "pi-durable-web:leaving-said";

/** What the page said leaving under and when (its wall clock, read before it sent the call). */
export interface LeavingSaid {
  epoch: number;
  at: number;
}

/** The page's word in a message to the worker, `undefined` when the message is another. */
export function saidIn(data: unknown): LeavingSaid | undefined {
  if (typeof data !== "object" || data === null || !Object.hasOwn(data, LEAVING_SAID)) return undefined;
  const said = (data as Record<string, unknown>)[LEAVING_SAID];
  if (typeof said !== "object" || said === null) return undefined;
  const { epoch, at } = said as Record<string, unknown>;
  return Number.isSafeInteger(epoch) && typeof at === "number" && Number.isFinite(at) ? { epoch: epoch as number, at } : undefined;
}

/**
 * At `pagehide` (the page's client, decision 0113): the page's own `lease.leaving` on `leaving` first, then — only when
 * it went out — its worker told so (`LEAVING_SAID`, before anything else the page posts it), then `leave()` (the
 * worker's own release, which wins within the object's grace). However late the worker gets to either, it writes
 * nothing from a grace after the word.
 */
export function pageLeaves(
  leaving: LeavingSocket | undefined,
  worker: { postMessage(message: unknown): void } | undefined,
  leave: () => Promise<unknown>,
): void {
  if (leaving?.leave()) worker?.postMessage({ [LEAVING_SAID]: leaving.said });
  void leave().catch(() => {});
}

/**
 * The worker's ear for its page's word (decision 0113): a message with `LEAVING_SAID` becomes
 * `follow.leavingSaid(epoch, how long ago it was sent)`; `now` is this machine's wall clock, as the page's `at` is, so
 * the time the message waited in the worker's queue counts. Any other message is passed over.
 */
export function hearLeaving(follow: Pick<TabFollow, "leavingSaid">, now: () => number = Date.now): (event: { data: unknown }) => void {
  return (event) => {
    const said = saidIn(event.data);
    if (said) follow.leavingSaid(said.epoch, now() - said.at);
  };
}

/** The ticket in a message from the worker, `null` when it withdrew it, `undefined` when the message is another. */
export function ticketIn(data: unknown): LeavingTicket | null | undefined {
  if (typeof data !== "object" || data === null || !Object.hasOwn(data, LEAVING_TICKET)) return undefined;
  const ticket = (data as Record<string, unknown>)[LEAVING_TICKET];
  if (ticket === null) return null;
  if (typeof ticket !== "object") return undefined;
  const { url, place, epoch, position } = ticket as Record<string, unknown>;
  const ok =
    typeof url === "string" &&
    typeof place === "string" &&
    Number.isSafeInteger(epoch) &&
    Number.isSafeInteger(position) &&
    (position as number) >= 0;
  return ok ? { url, place, epoch: epoch as number, position: position as number } : undefined;
}

/** The page's follow socket for its `leaving` (one per page client of a worker). */
export class LeavingSocket {
  readonly #connect: (url: string) => SocketLike;
  readonly #newId: () => string;
  #ticket: LeavingTicket | undefined;
  #socket: SocketLike | undefined;
  #url: string | undefined;
  /** The object answered this socket's hello with our version: the leaving may go out on it. */
  #ready = false;
  #failures = 0;
  #retry: ReturnType<typeof setTimeout> | undefined;
  /** The last `leaving` this socket sent: its epoch, and the wall clock read before the send (decision 0113). */
  #said: LeavingSaid | undefined;

  constructor(
    connect: (url: string) => SocketLike = (url) => new WebSocket(url) as SocketLike,
    newId: () => string = () => crypto.randomUUID(),
  ) {
    this.#connect = connect;
    this.#newId = newId;
  }

  /** Whether a `leaving` would go out now (a ticket, and a socket whose hello was answered). */
  get ready(): boolean {
    return this.#ready && this.#ticket !== undefined;
  }

  /** The worker's word: where the object stands while it holds the lease, or `null` once it holds none. */
  told(ticket: LeavingTicket | null): void {
    if (ticket === null) {
      this.#ticket = undefined;
      this.close();
      return;
    }
    this.#ticket = ticket;
    if (ticket.url !== this.#url || !this.#socket) {
      this.close();
      this.#url = ticket.url;
      this.#open();
    }
  }

  /** The last `leaving` that went out on this socket, for the worker (`LEAVING_SAID`): stop writing a grace after it. */
  get said(): LeavingSaid | undefined {
    return this.#said;
  }

  /** At `pagehide`: sends `lease.leaving(place, epoch, A)` (nothing when not ready). True when it went out. */
  leave(now: () => number = Date.now): boolean {
    const ticket = this.#ticket;
    if (!this.#ready || !ticket || !this.#socket) return false;
    const args = [ticket.place, ticket.epoch, ticket.position];
    // Read before the send: the object counts its grace from when it heard the word, never earlier.
    const at = now();
    try {
      this.#socket.send(encodeFollowMessage({ type: "call", id: this.#newId(), topic: "lease", method: "leaving", args }));
      this.#said = { epoch: ticket.epoch, at };
      return true;
    } catch {
      return false;
    }
  }

  close(): void {
    if (this.#retry !== undefined) clearTimeout(this.#retry);
    this.#retry = undefined;
    const socket = this.#socket;
    this.#socket = undefined;
    this.#url = undefined;
    this.#ready = false;
    try {
      socket?.close(1000, "the page holds no lease");
    } catch {
      // already closing
    }
  }

  #open(): void {
    const url = this.#url;
    if (url === undefined) return;
    const socket = this.#connect(url);
    this.#socket = socket;
    const hello = this.#newId();
    socket.addEventListener("open", () => {
      if (this.#socket === socket)
        socket.send(encodeFollowMessage({ type: "call", id: hello, topic: WIRE_TOPIC, method: "hello", args: [FOLLOW_WIRE_VERSION] }));
    });
    socket.addEventListener("message", (event) => {
      if (this.#socket !== socket) return;
      const parsed = parseFollowMessage(event.data, "object");
      if ("error" in parsed || parsed.message.type !== "answer" || parsed.message.id !== hello) return;
      const answer = parsed.message;
      // An object of another version (or before the hello) is not told: the worker's own release is all there is.
      this.#ready = helloOutcome("error" in answer ? { error: new Error(answer.error.message) } : { value: answer.value }) === undefined;
      if (this.#ready) this.#failures = 0;
    });
    const drop = () => {
      if (this.#socket !== socket) return;
      this.#socket = undefined;
      this.#ready = false;
      if (!this.#ticket) return;
      // Back by itself while the worker holds the lease, up to 10 s apart.
      this.#retry = setTimeout(
        () => {
          this.#retry = undefined;
          if (this.#ticket && !this.#socket) this.#open();
        },
        Math.min(10_000, 500 * 2 ** this.#failures++),
      );
    };
    socket.addEventListener("close", drop);
    socket.addEventListener("error", drop);
  }
}
