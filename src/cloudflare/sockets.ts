/**
 * The pages' WebSockets of a harness object, through the hibernation API: the object may sleep while pages
 * stay connected. Each socket keeps in its attachment who connected and the subscriptions it holds, so when
 * the object wakes (a page's message, the alarm) they are subscribed again and the page goes on hearing
 * without reconnecting; each sends its current value first. A subscription still waiting for its answer (a watch
 * of a conversation not come yet) is kept too and answered by the instance that wakes (decision 0111).
 * Subscriptions too large for an attachment make that page reconnect instead (code 1012).
 */

import type { Json } from "../base/json.ts";
import { InvalidRequest, NotAuthorized } from "../errors.ts";
import type { CallerLimits } from "../host/caller-bounds.ts";
import type { HostEndpoint } from "../host/endpoint.ts";
import { type HeldSubscription, type MessageConnection, parseClientMessage, serveMessages } from "../host/messages.ts";
import { pageError } from "./answers.ts";
import type { DurableObjectState, HibernatableWebSocket } from "./types.ts";

/** What a page's socket carries through a hibernation: the subscriptions it holds on this object. */
interface Attachment {
  version: 1;
  /** Who connected (what `authenticate` returned for the upgrade request). */
  caller?: Json;
  subscriptions?: HeldSubscription[];
  /** They did not fit in an attachment: the page reconnects after a hibernation. */
  overflow?: true;
}

/** The WebSocket close code that tells a page the object started again and it should reconnect. */
const RESTARTED = 1012;

/** The endpoint of a socket whose caller is not known: it refuses everything. */
const refuseAll: HostEndpoint = {
  call: (method) => Promise.reject(new NotAuthorized(method, "this socket connected before the object checked callers; reconnect.")),
  subscribe: (method) => Promise.reject(new NotAuthorized(method, "this socket connected before the object checked callers; reconnect.")),
  unsubscribe: () => {},
};

/** Sends a frame to a page; a page that is gone hears nothing (its subscriptions end with the close). */
function send(socket: HibernatableWebSocket, frame: object): void {
  try {
    socket.send(JSON.stringify(frame));
  } catch {
    // The socket is closed or closing.
  }
}

function attachmentOf(socket: HibernatableWebSocket): Attachment | undefined {
  try {
    const attachment = socket.deserializeAttachment() as Attachment | undefined;
    return attachment?.version === 1 ? attachment : undefined;
  } catch {
    return undefined;
  }
}

export class ObjectSockets {
  readonly #ctx: DurableObjectState;
  /** The host as a caller reaches it (through the object's doors). */
  readonly #endpointFor: (caller: Json) => HostEndpoint;
  /** Whether the object checks callers (`authenticate`): a socket without a caller then may call nothing. */
  readonly #checksCallers: boolean;
  readonly #connections = new Map<HibernatableWebSocket, MessageConnection>();
  /** What each socket (one caller) may hold at once (decision 0148). */
  readonly #limits: CallerLimits | undefined;

  constructor(ctx: DurableObjectState, endpointFor: (caller: Json) => HostEndpoint, checksCallers: boolean, limits?: CallerLimits) {
    this.#ctx = ctx;
    this.#endpointFor = endpointFor;
    this.#checksCallers = checksCallers;
    this.#limits = limits;
  }

  /** The upgrade of a request by `caller`: the page's end of a new socket (101), or why there is none. */
  accept(caller: Json): Response {
    const Pair = (globalThis as unknown as { WebSocketPair?: new () => Record<0 | 1, HibernatableWebSocket> }).WebSocketPair;
    if (!Pair || !this.#ctx.acceptWebSocket) return new Response("WebSockets need the Workers runtime.", { status: 501 });
    const { 0: page, 1: object } = new Pair();
    try {
      object.serializeAttachment({ version: 1, caller } satisfies Attachment);
    } catch {
      return Response.json(
        { error: pageError(new InvalidRequest("The caller that authenticate returned does not fit in a socket's attachment (2 KB).")) },
        { status: 400 },
      );
    }
    this.#ctx.acceptWebSocket(object);
    return new Response(null, { status: 101, webSocket: page } as ResponseInit);
  }

  /** A page's message (the object may have been asleep); a frame that is no message gets a typed error answer. */
  receive(socket: HibernatableWebSocket, message: string | ArrayBuffer): void {
    const connection = this.#connections.get(socket) ?? this.#connect(socket);
    const parsed = parseClientMessage(typeof message === "string" ? message : new TextDecoder().decode(message));
    if ("message" in parsed) connection.receive(parsed.message);
    else send(socket, { type: "error", id: parsed.id, error: pageError(parsed.error) });
  }

  /**
   * Pages still connected from an earlier instance (the object hibernated while they stayed): each subscribes
   * again what its attachment holds, or is told to reconnect when that did not fit.
   */
  restoreAll(): void {
    for (const socket of this.#ctx.getWebSockets?.() ?? []) {
      if (this.#connections.has(socket)) continue; // served by this instance already (its subscriptions are live)
      const attachment = attachmentOf(socket);
      if (attachment?.subscriptions && !attachment.overflow) {
        this.#connect(socket).restore(attachment.subscriptions);
      } else if (attachment?.overflow) {
        socket.close(RESTARTED, "The object started again: reconnect to subscribe again.");
      }
      // No subscriptions: the page never subscribed; its next message is served as it comes.
    }
  }

  /**
   * The pages still connected from an earlier instance that watch page tool calls (`watchPageCalls` in their
   * attachment): their claims survive the open, and `restoreAll` subscribes them again.
   */
  connectedPages(): string[] {
    const pages = new Set<string>();
    for (const socket of this.#ctx.getWebSockets?.() ?? []) {
      const attachment = attachmentOf(socket);
      if (!attachment?.subscriptions || attachment.overflow) continue;
      for (const held of attachment.subscriptions) {
        const options = held.method === "watchPageCalls" ? (held.args[1] as { pageId?: unknown } | undefined) : undefined;
        if (typeof options?.pageId === "string") pages.add(options.pageId);
      }
    }
    return [...pages];
  }

  /** The page went away: its subscriptions end. */
  close(socket: HibernatableWebSocket): void {
    const connection = this.#connections.get(socket);
    this.#connections.delete(socket);
    connection?.close();
  }

  /** Serves a page's socket; the subscriptions it holds are kept in the socket's attachment. */
  #connect(socket: HibernatableWebSocket): MessageConnection {
    const caller = attachmentOf(socket)?.caller;
    const connection = serveMessages(
      // A socket without a caller was accepted before the object checked callers: it may call only when none are.
      caller !== undefined || !this.#checksCallers ? this.#endpointFor(caller ?? null) : refuseAll,
      (reply) => send(socket, reply.type === "error" ? { ...reply, error: pageError(reply.error) } : reply),
      {
        ...(this.#limits ? { limits: this.#limits } : {}),
        onSubscriptions: (held) => {
          if (!this.#connections.has(socket)) return; // the page left: nothing to keep
          const who = caller !== undefined ? { caller } : {};
          try {
            socket.serializeAttachment({ version: 1, ...who, subscriptions: held } satisfies Attachment);
          } catch {
            // Larger than an attachment may be (2 KB): after a hibernation this page reconnects instead.
            try {
              socket.serializeAttachment({ version: 1, ...who, overflow: true } satisfies Attachment);
            } catch {
              // The socket is closing.
            }
          }
        },
      },
    );
    this.#connections.set(socket, connection);
    return connection;
  }
}

/** RFC 6455 §5.5: a Close frame's body is at most 125 bytes, the 2-byte code and a reason of at most 123. */
const REASON_BYTES = 123;

/**
 * Answers a peer's Close frame on a hibernatable socket, which the runtime does not do by itself (decision 0136): its
 * code when every runtime mode sends it (1000 or an application's 3000–4999; `pedantic_wpt` refuses the rest, and
 * the default refuses 1004 and the reserved ones), else 1000; its reason cut to the frame's 123 bytes at a character
 * (a peer's invalid UTF-8 decodes to U+FFFD, 3 bytes each). If the runtime still refuses, it answers a bare 1000. A
 * socket already closed (an error ended it) ignores both.
 */
export function answerClose(socket: HibernatableWebSocket, code?: number, reason?: string): void {
  const sendable = code === 1000 || (code !== undefined && code >= 3000 && code <= 4999) ? code : 1000;
  try {
    socket.close(sendable, reason === undefined ? undefined : fitReason(reason));
  } catch {
    try {
      socket.close(1000);
    } catch {
      // Closed already: nothing more to answer.
    }
  }
}

/** `reason`'s longest prefix, whole characters, that fits a Close frame. */
function fitReason(reason: string): string {
  const encoder = new TextEncoder();
  if (encoder.encode(reason).length <= REASON_BYTES) return reason;
  let fitted = "";
  let bytes = 0;
  for (const character of reason) {
    bytes += encoder.encode(character).length;
    if (bytes > REASON_BYTES) break;
    fitted += character;
  }
  return fitted;
}
