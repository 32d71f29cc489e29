/**
 * The page side of page tools (decision 0028): a page provides implementations of tools the worker or object
 * declared (`definePageTool`). It watches the conversation's calls of those tools; a waiting call is claimed
 * (one commit: the first page wins) and only then run here; its result is sent under the claim. A call this
 * page claimed that ends otherwise (aborted, released) has its `signal` aborted.
 *
 * Each provision watches and claims as a page of its own (`provisionOf`: the page's id and a random part, decision
 * 0150's review): two provisions in one page (React StrictMode's second effect, two components providing one tool)
 * are two claimants, so the second's claim is `PageCallTaken`, never a retry of the first's; and a provision that
 * stops has its claims released by its host (its last watch ended) whatever the page's other provisions do.
 */
import type { PageCallClaimed, PageToolResult, PendingPageCall } from "../agent/tasks/page-calls.ts";
import { errorMessage } from "../base/error-message.ts";
import { randomIds } from "../base/ids.ts";
import type { Json } from "../base/json.ts";
import type { RemoteHost, Unsubscribe } from "./protocol.ts";

/** What a page tool's implementation is given besides its arguments. */
export interface PageToolCall {
  conversationId: number;
  callId: string;
  toolName: string;
  /** 1 for the first run; more when a safe tool runs again after a reload cut the last run off. */
  attempt: number;
  /** Aborted when the call ended without this run's result (its conversation was aborted, its claim released). */
  signal: AbortSignal;
}

/**
 * A page tool's implementation: returns its result (text, or `{ content, isError?, details? }`); a throw
 * becomes an error result the model reads. It runs once per claim: do not run side effects elsewhere.
 */
export type PageToolImplementation = (args: { [key: string]: Json }, call: PageToolCall) => PageToolResult | Promise<PageToolResult>;

export interface ProvidePageToolsOptions {
  /** Told of a claim or result that failed for another reason than another page or the call's end. */
  onError?: (error: unknown, call: PendingPageCall) => void;
  /**
   * Told once, with the host's typed error, when the host refused this page's watch of its calls as the transport
   * asked it again (a reconnect, the database moving to another tab): the tools are no longer provided and the runs
   * under way are aborted, as after the returned function (decision 0114).
   */
  onLost?: (error: Error) => void;
}

type PageHost = Pick<RemoteHost, "watchPageCalls" | "claimPageCall" | "answerPageCall">;

/** One run of a call in a provision: from its claim to its answer. */
interface Run {
  callId: string;
  controller: AbortController;
  /** The attempt it claims (the claim's, once it answered). */
  attempt: number;
  /** `${provision}:${callId}:${attempt}`: the same when the claim is sent again after a lost reply. */
  claimId: string;
  implementation: PageToolImplementation;
  /** How many lists had come when its claim was last sent. */
  sentAt: number;
  /** Its claim's last reply was lost: sent again at the next list that may still show the call as this page's. */
  lost: boolean;
  /** Sent again once without waiting for a list. */
  resent: boolean;
}

/** A claim whose reply did not come: it may or may not have been stored (`ConnectionLost`), or was not (`NotReady`). */
export const replyLost = (error: unknown) => error instanceof Error && (error.name === "ConnectionLost" || error.name === "NotReady");

/** Whether `call` (from the host's last list) shows attempt `attempt` over: ended, released, or a later one claimed. */
const over = (call: PendingPageCall | undefined, attempt: number) =>
  !call || call.attempts > attempt || (call.status === "waiting" && call.attempts >= attempt);

/** Errors that only say another page runs the call, or that it ended: nothing to report. */
const EXPECTED = new Set(["PageCallTaken", "PageCallEnded", "PageClaimLost", "WorkerGone", "HarnessClosed"]);

/**
 * The id one provision of page `pageId` watches and claims under: unique per provision, so its claim id
 * (`${provision}:${callId}:${attempt}`) is too. The same claim sent again (a transport's resend after a lost reply)
 * keeps its id and is still a retry; a second provision's is another page's claim.
 */
export function provisionOf(pageId: string): string {
  return `${pageId}~${randomIds().slice(0, 8)}`;
}

/** Provides `tools` to conversation `conversationId` from page `pageId`, until the returned function is called. */
export async function providePageTools(
  host: PageHost,
  pageId: string,
  conversationId: number,
  tools: Readonly<Record<string, PageToolImplementation>>,
  options: ProvidePageToolsOptions = {},
): Promise<Unsubscribe> {
  const provision = provisionOf(pageId);
  /** The runs of this page by call id: the attempt each claims, its claim id, and whether its claim's reply was lost. */
  const running = new Map<string, Run>();
  /**
   * Aborted runs whose claim's last reply was lost, by call id: the claim may have been stored at a later attempt (a
   * resend applied after a release). Sent again under its id when a list shows the call claimed and no run of this
   * provision holds it; the host answers `claimed` (taken over) or `PageCallTaken` (decision 0152's second review, A).
   */
  const maybe = new Map<string, Run>();
  /** The host's last list of calls, and how many lists came: a claim whose reply was lost is sent again after a new one. */
  let listed = new Map<string, PendingPageCall>();
  let lists = 0;
  let stopped = false;
  const report = (error: unknown, call: PendingPageCall) => {
    if (!(error instanceof Error && EXPECTED.has(error.name))) options.onError?.(error, call);
  };
  const done = (callId: string, controller: AbortController) => {
    if (running.get(callId)?.controller === controller) running.delete(callId);
  };
  const claim = async (call: PendingPageCall, entry: Run) => {
    const { controller, claimId } = entry;
    entry.sentAt = lists;
    entry.lost = false;
    let claimed: PageCallClaimed;
    try {
      claimed = await host.claimPageCall(conversationId, call.callId, { claimId, pageId: provision });
    } catch (error) {
      // The reply was lost (the claim may have been stored at the host): claimed again under the same claim id, which
      // the host takes for a retry — its claim back if it stored it, else a claim now. Sent again at once if a list
      // came since it was sent (or the first time), else at the next list (the transport asks its watch again as it
      // reconnects). So at most one send per list: a transport that fails at once does not spin.
      if (replyLost(error) && !controller.signal.aborted && running.get(call.callId) === entry) {
        entry.lost = true;
        if (lists > entry.sentAt || !entry.resent) {
          entry.resent = true;
          again(entry);
        }
        return;
      }
      if (replyLost(error) && !stopped) {
        maybe.set(call.callId, entry);
        return;
      }
      done(call.callId, controller);
      report(error, call);
      return;
    }
    // Its run was aborted while the claim was in flight because a list showed the call waiting again, but the claim
    // won that later attempt (a resend after a lost reply, applied after the release): it is this provision's claim
    // now and nobody else's, so it is run here (decision 0152's review, M1).
    const taken = claimed.attempt > entry.attempt ? takeOver(entry, claimed.attempt) : entry;
    taken.attempt = claimed.attempt;
    await run(call, taken, claimed);
  };
  /**
   * The run of the claim of `entry`, which came back for the later attempt `attempt`: `entry` if its run was not
   * aborted; else a new run under its claim id, taking the place of the newer claim of the call (that one is then
   * `PageCallTaken`), unless the provision stopped, a list already showed `attempt` ended, released or a later one
   * claimed (decision 0152's second review, B), or a newer run of this provision holds a later attempt.
   */
  const takeOver = (entry: Run, attempt: number): Run => {
    if (!entry.controller.signal.aborted || stopped) return entry;
    const current = running.get(entry.callId);
    const call = listed.get(entry.callId);
    if ((current && current.attempt > attempt) || over(call, attempt)) return entry;
    current?.controller.abort();
    const next: Run = { ...entry, controller: new AbortController(), attempt, lost: false };
    running.set(entry.callId, next);
    return next;
  };
  /** Claims again the call of `entry`, whose claim's reply was lost, if the last list shows it may still be this page's. */
  const again = (entry: Run) => {
    const call = listed.get(entry.callId);
    if (!entry.lost || !call || over(call, entry.attempt)) return;
    void claim(call, entry);
  };
  const run = async (call: PendingPageCall, { controller, claimId, implementation }: Run, claimed: PageCallClaimed) => {
    // Aborted while the claim was in flight (the provision stopped, its watch was lost, the host's list ended the
    // call): never run here. The claim goes with this provision's watch (the host releases a page's claims when its
    // last watch ends), so the call follows its replay policy (decision 0150's review, M1).
    if (controller.signal.aborted) {
      done(call.callId, controller);
      return;
    }
    let result: PageToolResult;
    try {
      result = await implementation(claimed.arguments, {
        conversationId,
        callId: call.callId,
        toolName: call.toolName,
        attempt: claimed.attempt,
        signal: controller.signal,
      });
    } catch (error) {
      result = { content: `Tool ${call.toolName} failed in the page: ${errorMessage(error)}`, isError: true };
    }
    try {
      if (!controller.signal.aborted) await host.answerPageCall(conversationId, call.callId, claimId, result ?? "");
    } catch (error) {
      report(error, call);
    } finally {
      done(call.callId, controller);
    }
  };
  const stop = () => {
    stopped = true;
    for (const { controller } of running.values()) controller.abort();
    running.clear();
    maybe.clear();
  };
  const lost = (error: Error) => {
    if (stopped) return;
    stop();
    options.onLost?.(error);
  };
  const listener = (calls: PendingPageCall[]) => {
    if (stopped) return;
    listed = new Map(calls.map((call) => [call.callId, call]));
    lists++;
    for (const [callId, entry] of running) {
      // Ended, released, or a later attempt claimed: this run's result would not be committed. A claim whose reply was
      // lost may have won that later attempt: kept as maybe this provision's.
      if (over(listed.get(callId), entry.attempt)) {
        entry.controller.abort();
        running.delete(callId);
        if (entry.lost) maybe.set(callId, entry);
      }
    }
    for (const call of calls) {
      const implementation = Object.hasOwn(tools, call.toolName) ? tools[call.toolName] : undefined;
      if (call.status !== "waiting" || !implementation || running.has(call.callId)) continue;
      const attempt = call.attempts + 1;
      const entry: Run = {
        callId: call.callId,
        controller: new AbortController(),
        attempt,
        claimId: `${provision}:${call.callId}:${attempt}`,
        implementation,
        sentAt: lists,
        lost: false,
        resent: false,
      };
      running.set(call.callId, entry);
      void claim(call, entry);
    }
    for (const entry of running.values()) again(entry);
    for (const [callId, entry] of maybe) {
      const call = listed.get(callId);
      if (!call || call.status === "waiting") maybe.delete(callId);
      else if (!running.has(callId) && lists > entry.sentAt) {
        maybe.delete(callId);
        void claim(call, entry);
      }
    }
  };
  const unsubscribe = await host.watchPageCalls(conversationId, { pageId: provision, tools: Object.keys(tools) }, listener, lost);
  return () => {
    if (stopped) return;
    stop();
    unsubscribe();
  };
}
