/**
 * The object's answers to `follow.snapshot(place, id?, index?)` (decision 0047), over its `SnapshotServer`: a part
 * for a tab that cannot follow the log (forked, new, or behind the trimmed tail). Asking again for a part reads the
 * same part; asking again for a take already answered (a resend that crossed the answer) answers that take's first
 * part again while it is kept, without a new take (decision 0070). A call still being answered is answered once,
 * where it was asked last: the link resends an unanswered call every few seconds and a take waits in line (one at a
 * time, decision 0058) — each resend taken again would count against the caller's takes, read the copy again and
 * evict its own snapshot.
 */
import type { Json } from "../base/json.ts";
import { NotAuthorized } from "../errors.ts";
import { errorShape } from "./object-door.ts";
import type { SnapshotServer } from "./snapshot.ts";
import { encodeFollowMessage, type ObjectMessage } from "./wire.ts";

export class SnapshotAnswers {
  readonly #server: SnapshotServer;
  /** This object's own place: no tab asks for a snapshot as it. */
  readonly #place: string;
  /** Calls still being answered, by caller, place and request id: where the answer goes (asked last). */
  readonly #waiting = new Map<string, (frame: string) => void>();

  constructor(server: SnapshotServer, place: string) {
    this.#server = server;
    this.#place = place;
  }

  /** Answers call `id` (`args`: place, snapshot id, part index) on `reply`, or on the connection that asks it last. */
  async answer(id: string, args: Json[], reply: (frame: string) => void, caller?: string): Promise<void> {
    const [place, snapshot, index] = args as [string, string | undefined, number | undefined];
    const key = JSON.stringify([caller ?? null, place, id]);
    const waiting = this.#waiting.has(key);
    this.#waiting.set(key, reply);
    if (waiting) return;
    let answer: ObjectMessage;
    try {
      if (place === this.#place) throw new NotAuthorized("follow.snapshot", `the place ${JSON.stringify(place)} is this object's own.`);
      // Counted per authorized caller when the platform names one (decision 0064): a caller the door lets use many
      // places has one bucket, not one per place name it declares.
      const part = await this.#server.part(snapshot, index, caller === undefined ? place : `caller:${caller}`, key);
      answer = { type: "answer", id, value: part as unknown as Json };
    } catch (error) {
      answer = { type: "answer", id, error: errorShape(error) };
    }
    const to = this.#waiting.get(key) ?? reply;
    this.#waiting.delete(key);
    to(encodeFollowMessage(answer));
  }
}
