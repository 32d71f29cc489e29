/**
 * The object's calls answered once per request id (object-end.ts, decision 0031), platform-neutral. A tab resends a
 * call it has no answer to (a lost frame, a long server tool every few hundred ms): a duplicate of a settled call gets
 * the same answer, and one still being answered is answered once, on the connection that asked last — each resend must
 * not queue another copy of the answer. `lease` answers are kept durably too (`AnswerStore`), across instances.
 */
import type { Json } from "../base/json.ts";
import type { AnswerStore } from "./object-end-options.ts";
import { encodeFollowMessage, type ObjectMessage } from "./wire.ts";

/** Answers remembered per request id (a duplicate call gets the same answer). */
const REMEMBERED_ANSWERS = 512;

export class AnswerMemory {
  readonly #answers = new Map<string, Promise<ObjectMessage>>();
  /** Calls still being answered: where their answer goes (the connection that asked last; a resend asks again). */
  readonly #waiting = new Map<string, (frame: string) => void>();
  readonly #store: AnswerStore | undefined;

  constructor(store: AnswerStore | undefined) {
    this.#store = store;
  }

  /**
   * Answers call `id` on `reply`: the remembered answer, or `compute()`'s (then `settled` is told it before it is sent).
   * `durable`: the answer is kept in the store as well (the lease's calls).
   */
  async answer(
    id: string,
    durable: boolean,
    reply: (frame: string) => void,
    compute: () => Promise<ObjectMessage>,
    settled?: (message: ObjectMessage) => Promise<void>,
  ): Promise<void> {
    if (this.#waiting.has(id)) {
      this.#waiting.set(id, reply);
      return;
    }
    let answer = this.#answers.get(id);
    const kept = answer || !durable ? undefined : this.#store?.get(id);
    if (kept !== undefined) answer = Promise.resolve(kept as unknown as ObjectMessage);
    if (answer) {
      reply(encodeFollowMessage(await answer));
      return;
    }
    answer = compute();
    const store = durable ? this.#store : undefined;
    if (store)
      answer = answer.then((message) => {
        store.put(id, message as unknown as Json);
        return message;
      });
    this.#answers.set(id, answer);
    if (this.#answers.size > REMEMBERED_ANSWERS) this.#answers.delete(this.#answers.keys().next().value!);
    this.#waiting.set(id, reply);
    const message = await answer;
    await settled?.(message);
    const to = this.#waiting.get(id) ?? reply;
    this.#waiting.delete(id);
    to(encodeFollowMessage(message));
  }
}
