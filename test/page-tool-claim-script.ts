/** A scripted host for one page call, to order claims and their replies by hand (decision 0152's reviews). */
import type { PageCallClaimed, PendingPageCall } from "../src/agent/tasks/page-calls.ts";
import { ConnectionLost, PageCallTaken } from "../src/errors.ts";

export const tick = async (turns = 5) => {
  for (let i = 0; i < turns; i++) await new Promise((resolve) => setTimeout(resolve, 0));
};

/**
 * A scripted host with `claimIn`'s rules for one safe call `c`: a waiting call is claimed by any claim id at its next
 * attempt; the same id again while claimed gets its claim back; another id is `PageCallTaken`. Each claim is answered
 * when the test says (`ok`, or `lose`: stored, reply lost).
 */
export function scriptedHost() {
  const record = { status: "waiting" as "waiting" | "claimed", attempts: 0, claimId: "" };
  let listener: (calls: PendingPageCall[]) => void = () => {};
  const pending: Array<{ ok: () => void; lose: () => void; store: () => () => void }> = [];
  const sent: string[] = [];
  const answers: string[] = [];
  const list = () =>
    listener([
      {
        conversationId: 1,
        taskId: 1,
        callId: "c",
        toolName: "t",
        arguments: {},
        status: record.status,
        requestedAt: 0,
        attempts: record.attempts,
      },
    ]);
  const apply = (claimId: string): PageCallClaimed => {
    if (record.status === "claimed") {
      if (record.claimId === claimId) return { callId: "c", taskId: 1, toolName: "t", arguments: {}, claimId, attempt: record.attempts };
      throw new PageCallTaken("c", 1, 0);
    }
    record.status = "claimed";
    record.attempts++;
    record.claimId = claimId;
    return { callId: "c", taskId: 1, toolName: "t", arguments: {}, claimId, attempt: record.attempts };
  };
  const host = {
    watchPageCalls: async (_c: number, _p: unknown, l: (calls: PendingPageCall[]) => void) => {
      listener = l;
      return () => {};
    },
    claimPageCall: (_c: number, _call: string, claim: { claimId: string }) =>
      new Promise<PageCallClaimed>((resolve, reject) => {
        sent.push(claim.claimId);
        pending.push({
          ok: () => {
            try {
              resolve(apply(claim.claimId));
            } catch (error) {
              reject(error);
            }
          },
          lose: () => {
            try {
              apply(claim.claimId);
            } catch {
              // refused at the host: its reply lost all the same
            }
            reject(new ConnectionLost());
          },
          // Applied at the host now, its reply delivered when the returned function is called.
          store: () => {
            try {
              const claimed = apply(claim.claimId);
              return () => resolve(claimed);
            } catch (error) {
              return () => reject(error);
            }
          },
        });
      }),
    answerPageCall: async (_c: number, _call: string, claimId: string) => {
      if (record.status === "claimed" && record.claimId === claimId) answers.push(claimId);
    },
  };
  /** Claim :1 stored and its reply lost, sent again; then the claim released and the call waiting again, listed first. */
  const releasedWhileResent = async () => {
    list();
    await tick();
    pending.shift()?.lose();
    await tick();
    record.status = "waiting"; // the next instance released the claim (the page was not kept)
    list(); // the run of :1 is aborted and :2 sent
    await tick();
  };
  /** A list without the call: it ended. */
  const ended = () => listener([]);
  return { host, record, list, ended, pending, sent, answers, releasedWhileResent };
}
