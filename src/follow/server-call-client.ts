/**
 * The asking half of server tools (decision 0036): the port a lease holder that does not run server tools itself (a
 * tab) gives its harness (`HarnessOptions.serverCalls`). Each ask is a follow link `call` (wire.ts) of topic
 * `server-tools`, sent again under the same request id every `RESEND_MS` on the harness clock until its `answer`
 * arrives, over a link that may lose, duplicate and reorder: the server answers every ask of a call id with the same
 * stored answer, so a lost answer costs one more ask, and a duplicated or late one finds nothing waiting.
 */
import type { ServerCallAnswer, ServerCallPort, ServerCallRequest } from "../agent/server-port.ts";
import type { Clock } from "../base/clock.ts";
import { BACKGROUND_CONTEXT, type Context, waitFor } from "../base/context.ts";
import type { Json } from "../base/json.ts";
import { ConnectionLost, InvalidArguments } from "../errors.ts";
import { deserializeError, serializeError } from "../host/error-wire.ts";
import type { ErrorShape } from "../host/protocol.ts";
import { RESEND_MS } from "./handover.ts";
import { SERVER_TOOLS_TOPIC, serverCallAnswer } from "./server-call-messages.ts";
import type { ServerCalls } from "./server-calls.ts";

/** What this side sends and receives, as wire.ts's `CallMessage` and `AnswerMessage` are. */
export interface ServerCallMessage {
  type: "call";
  id: string;
  topic: typeof SERVER_TOOLS_TOPIC;
  method: "call";
  args: [ServerCallRequest];
}
export type ServerAnswerMessage = { type: "answer"; id: string; value: Json } | { type: "answer"; id: string; error: ErrorShape };

interface Waiting {
  resolve(answer: ServerCallAnswer): void;
  reject(error: Error): void;
  stop(): void;
}

export class ServerCallClient implements ServerCallPort {
  readonly #clock: Clock;
  readonly #send: (message: ServerCallMessage) => void;
  /** By request id: `<epoch>:<n>`, so that a restarted tab (a new epoch) never reuses a dead incarnation's ids. */
  readonly #waiting = new Map<string, Waiting>();
  #asked = 0;

  /** `send` puts a message on the link to the server; its answers go to `receive`. */
  constructor(options: { clock: Clock; send(message: ServerCallMessage): void }) {
    this.#clock = options.clock;
    this.#send = options.send;
  }

  /** How many asks wait for their answer. */
  get waiting(): number {
    return this.#waiting.size;
  }

  call(request: ServerCallRequest, context: Context): Promise<ServerCallAnswer> {
    const id = `${request.epoch}:${++this.#asked}`;
    let cancel: (() => void) | undefined;
    let waiting!: Waiting;
    const answered = new Promise<ServerCallAnswer>((resolve, reject) => {
      waiting = {
        resolve,
        reject,
        stop: () => {
          cancel?.();
          this.#waiting.delete(id);
        },
      };
    });
    this.#waiting.set(id, waiting);
    const ask = () => {
      this.#send({ type: "call", id, topic: SERVER_TOOLS_TOPIC, method: "call", args: [request] });
      cancel = this.#clock.setTimer(RESEND_MS, ask);
    };
    ask();
    return waitFor(answered, context).finally(() => waiting.stop());
  }

  /**
   * An answer from the server. One for an ask that no longer waits, or malformed, is dropped; a value that is not a
   * `ServerCallAnswer` fails the ask (`InvalidArguments`): the server is checked like any stranger.
   */
  receive(message: unknown): void {
    if (typeof message !== "object" || message === null) return;
    const { type, id } = message as { type?: unknown; id?: unknown };
    const waiting = type === "answer" && typeof id === "string" ? this.#waiting.get(id) : undefined;
    if (!waiting) return;
    waiting.stop();
    if (Object.hasOwn(message, "error")) {
      const error = (message as { error?: unknown }).error as ErrorShape | undefined;
      const named = typeof error?.name === "string" && typeof error.message === "string";
      waiting.reject(named ? deserializeError(error) : new InvalidArguments("serverCall", "the server's refusal is not an error"));
      return;
    }
    const value = (message as { value?: unknown }).value;
    let problem: string | undefined;
    try {
      problem = serverCallAnswer(value, "the server's answer");
    } catch (error) {
      problem = String(error); // nested deeper than any harness accepts
    }
    if (problem) waiting.reject(new InvalidArguments("serverCall", problem));
    else waiting.resolve(value as unknown as ServerCallAnswer);
  }
}

/**
 * The server's side of the link: answers a `server-tools` call through `calls` (every ask, also a repeated one: the
 * answer is the stored one), a refusal as the error without the server's stack. Anything else is not for it.
 */
export async function serveServerCall(calls: ServerCalls, message: unknown, send: (message: ServerAnswerMessage) => void): Promise<void> {
  const call = message as Partial<ServerCallMessage> | null;
  if (call?.type !== "call" || call.topic !== SERVER_TOOLS_TOPIC || typeof call.id !== "string" || call.id.length > 100) return;
  const { id } = call;
  try {
    if (call.method !== "call" || !Array.isArray(call.args) || call.args.length !== 1)
      throw new InvalidArguments("serverCall", "it takes one argument, the request");
    const answer = await calls.call(call.args[0], BACKGROUND_CONTEXT);
    send({ type: "answer", id, value: answer as unknown as Json });
  } catch (error) {
    const { stack: _stack, ...refusal } = serializeError(error);
    send({ type: "answer", id, error: refusal });
  }
}

/**
 * The port over a follow link that answers calls by request id (`FollowLink.call`): each ask is one call of topic
 * `server-tools`; a lost connection (`ConnectionLost`) asks again `RESEND_MS` later on the harness clock (the server
 * answers it from its store), and the answer is checked as a `ServerCallAnswer` before the harness trusts it.
 */
export function linkServerCalls(link: { call(topic: string, method: string, args: Json[]): Promise<Json> }, clock: Clock): ServerCallPort {
  return {
    async call(request, context) {
      for (;;) {
        try {
          const value = await waitFor(link.call(SERVER_TOOLS_TOPIC, "call", [request as unknown as Json]), context);
          const problem = serverCallAnswer(value, "the server's answer");
          if (problem) throw new InvalidArguments("serverCall", problem);
          return value as unknown as ServerCallAnswer;
        } catch (error) {
          if (!(error instanceof ConnectionLost)) throw error;
          await waitFor(new Promise<void>((resolve) => clock.setTimer(RESEND_MS, resolve)), context);
        }
      }
    },
  };
}
