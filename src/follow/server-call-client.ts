/**
 * The asking half of server tools (decision 0036): the port a lease holder that does not run server tools itself (a
 * tab) gives its harness (`HarnessOptions.serverCalls`). Each call is sent to the server and sent again on the
 * harness clock until an answer arrives, over a link that may lose, duplicate and reorder: the server answers every
 * ask of a call id with the same stored answer, so a lost answer costs one more ask, and a duplicated or late one
 * finds nothing waiting and is dropped.
 */
import type { ServerCallAnswer, ServerCallPort, ServerCallRequest } from "../agent/server-port.ts";
import type { Clock } from "../base/clock.ts";
import { BACKGROUND_CONTEXT, type Context, waitFor } from "../base/context.ts";
import { deserializeError, serializeError } from "../host/error-wire.ts";
import { RESEND_MS } from "./handover.ts";
import { type ServerCallMessage, serverCallMessage } from "./server-call-messages.ts";
import type { ServerCalls } from "./server-calls.ts";

interface Waiting {
  epoch: number;
  resolve(answer: ServerCallAnswer): void;
  reject(error: Error): void;
  stop(): void;
}

export class ServerCallClient implements ServerCallPort {
  readonly #clock: Clock;
  readonly #send: (message: ServerCallMessage) => void;
  readonly #waiting = new Map<string, Waiting>();

  /** `send` puts a message on the link to the server; what comes back goes to `receive`. */
  constructor(options: { clock: Clock; send(message: ServerCallMessage): void }) {
    this.#clock = options.clock;
    this.#send = options.send;
  }

  /** How many calls wait for their answer. */
  get waiting(): number {
    return this.#waiting.size;
  }

  call(request: ServerCallRequest, context: Context): Promise<ServerCallAnswer> {
    const key = keyOf(request.conversationId, request.callId);
    this.#waiting.get(key)?.stop(); // one wait per call id: a new ask (a rerun of the phase) replaces an old one
    let cancel: (() => void) | undefined;
    let waiting: Waiting | undefined;
    const answered = new Promise<ServerCallAnswer>((resolve, reject) => {
      waiting = { epoch: request.epoch, resolve, reject, stop: () => cancel?.() };
    });
    const stop = waiting!.stop;
    waiting!.stop = () => {
      stop();
      if (this.#waiting.get(key) === waiting) this.#waiting.delete(key);
    };
    this.#waiting.set(key, waiting!);
    const ask = () => {
      this.#send({ type: "server-call", request });
      cancel = this.#clock.setTimer(RESEND_MS, ask);
    };
    ask();
    return waitFor(answered, context).finally(() => waiting!.stop());
  }

  /** A message from the server. Anything malformed, or for a call that no longer waits, is dropped. */
  receive(message: unknown): void {
    let problem: string | undefined;
    try {
      problem = serverCallMessage(message, "the message");
    } catch (error) {
      problem = String(error); // deeper than any harness accepts
    }
    if (problem) return;
    const known = message as ServerCallMessage;
    if (known.type === "server-call") return;
    const waiting = this.#waiting.get(keyOf(known.conversationId, known.callId));
    if (!waiting || (known.type === "server-refused" && known.epoch !== waiting.epoch)) return;
    waiting.stop();
    if (known.type === "server-answer") waiting.resolve(known.answer);
    else waiting.reject(deserializeError(known.error));
  }
}

/**
 * The server's side of the link: answers a `server-call` message through `calls` (every ask, also a repeated one:
 * the answer is the stored one), a refusal as the error. Anything else, or malformed, is dropped.
 */
export async function serveServerCall(calls: ServerCalls, message: unknown, send: (message: ServerCallMessage) => void): Promise<void> {
  if ((message as { type?: unknown } | null)?.type !== "server-call") return;
  const request = (message as { request?: ServerCallRequest }).request;
  const named =
    typeof request?.conversationId === "number" &&
    typeof request.callId === "string" &&
    request.callId.length <= 200 &&
    Number.isSafeInteger(request.epoch);
  try {
    const answer = await calls.call(request as ServerCallRequest, BACKGROUND_CONTEXT);
    const { conversationId, callId, epoch } = request!;
    send({ type: "server-answer", conversationId, callId, epoch, answer });
  } catch (error) {
    // A call too malformed to name cannot be answered: nobody waits for it. The server's stack stays here.
    const { stack: _stack, ...refusal } = serializeError(error);
    if (named) {
      const { conversationId, callId, epoch } = request!;
      send({ type: "server-refused", conversationId, callId, epoch, error: refusal });
    }
  }
}

function keyOf(conversationId: number, callId: string): string {
  return `${conversationId}:${callId}`;
}
