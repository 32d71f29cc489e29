/**
 * One caller's writes waiting at a place that serves a copy, bounded (decision 0097). The writes another device makes
 * of a conversation — `submit`, `decide`, `abortConversation` — wait at the copy until the place that holds the lease
 * answers them (sent again while it is unreachable); the copy service bounds them all together (`MAX_FORWARDS`, 256),
 * and this bounds each caller's share of them, so one caller cannot fill the queue. Counted by key: a write sent again
 * under its key (a retry after `ConnectionLost`) joins the one that waits and takes no more room.
 *
 * ```ts
 * const waiting = new WaitingWrites();
 * const answer = await waiting.run(caller, "submit", [conversationId, draft], () => service.submit(conversationId, draft));
 * ```
 */
import { TooManyWaitingWrites } from "../errors.ts";
import type { HostEndpoint } from "../host/endpoint.ts";

/**
 * At most this many distinct writes (by key) of one caller wait at once. A person on one device has a few writes in
 * flight (a submit, a handful of decisions); 32 lets one approve a batch of parallel tool calls while the holder is
 * away, and takes one caller an eighth of the copy service's 256.
 */
export const MAX_WAITING_PER_CALLER = 32;

/** The writes counted: the ones a copy forwards to the holder. */
const COUNTED = new Set(["submit", "decide", "abortConversation"]);

/**
 * The key a write of `method` waits under: a submit's `requestId`, a decision's `decisionId`, an abort's conversation;
 * a write sent without its key counts alone (the copy service mints it one). Undefined for a method not counted.
 */
function keyOf(method: string, args: readonly unknown[]): string | object | undefined {
  if (!COUNTED.has(method)) return undefined;
  const key =
    method === "submit"
      ? (args[1] as { requestId?: unknown } | undefined)?.requestId
      : method === "decide"
        ? (args[2] as { decisionId?: unknown } | undefined)?.decisionId
        : ""; // an abort: its conversation
  return typeof key === "string" ? `${method}/${String(args[0])}/${key}` : {}; // unkeyed: counts alone
}

export class WaitingWrites {
  readonly #limit: number;
  /** Per caller, its writes waiting: key → how many calls wait on it. */
  readonly #waiting = new Map<unknown, Map<string | object, number>>();

  constructor(limit = MAX_WAITING_PER_CALLER) {
    this.#limit = limit;
  }

  /**
   * Runs `write` counted as `caller`'s write of `method` with `args` (a method not counted just runs); rejects with
   * `TooManyWaitingWrites` (naming the call `name`) without running it when `caller` has its share of other keys
   * waiting.
   */
  async run<T>(caller: unknown, method: string, args: readonly unknown[], write: () => Promise<T>, name = method): Promise<T> {
    const key = keyOf(method, args);
    if (key === undefined) return write();
    const mine = this.#waiting.get(caller) ?? new Map<string | object, number>();
    if (!mine.has(key) && mine.size >= this.#limit) throw new TooManyWaitingWrites(name, this.#limit);
    mine.set(key, (mine.get(key) ?? 0) + 1);
    this.#waiting.set(caller, mine);
    try {
      return await write();
    } finally {
      const left = (mine.get(key) ?? 1) - 1;
      if (left > 0) mine.set(key, left);
      else mine.delete(key);
      if (mine.size === 0 && this.#waiting.get(caller) === mine) this.#waiting.delete(caller);
    }
  }

  /** `endpoint` with `caller`'s counted calls run through `run` (a page's endpoint at the copy, say). */
  bound(endpoint: HostEndpoint, caller: unknown): HostEndpoint {
    return {
      call: (method, args) => this.run(caller, method, args, () => endpoint.call(method, args)),
      subscribe: (method, args, emit, lost) => endpoint.subscribe(method, args, emit, lost),
      unsubscribe: (id) => endpoint.unsubscribe(id),
    };
  }
}
