/**
 * Page tool calls made through a place that does not run the conversation (issue 27 item 5, decision 0044): a tab
 * that follows its object while the object holds the lease claims and answers the object's page calls over its
 * follow link (topic `page-calls`). The page's claim is a commit at the holder under the page's `claimId` (a resend
 * or a retry gets the same claim), its answer one commit under that claim; a claim lives as long as the link it came
 * through and the page that made it (decision 0028's rule, a link standing for the page's socket): the page's last
 * watch ended (`releasePage`), or the link's connection closed, and the holder releases what the page claimed.
 *
 * ```ts
 * end.serve(PAGE_CALLS, …); // built into ObjectEnd: the object answers with the harness that holds the lease
 * const port = linkPageCalls(link); // the tab's side: createHost({ pageCallsElsewhere: () => port })
 * ```
 */
import type { PageCallClaimed, PageCallRecord, PageToolResult } from "../agent/tasks/page-calls.ts";
import { BACKGROUND_CONTEXT as ctx } from "../base/context.ts";
import type { Json } from "../base/json.ts";
import { ConnectionLost, FollowMessageRefused, InvalidArguments, LeaseNotHeld, NotAuthorized } from "../errors.ts";
import type { Harness } from "../harness.ts";
import { PROTOCOL } from "../host/protocol.ts";
import { type ArgsCheck, args, type Check, id, integer, literal, record, text } from "../shape.ts";

/** The follow link's topic of page tool calls a following tab makes of the holder (its name in `FOLLOW_TOPICS`). */
export const PAGE_CALLS = "page-calls";
/** The other way: page tool calls a device's page made at the object's copy, made by the tab that holds the lease. */
export const DEVICE_PAGE_CALLS = "device-page-calls";

const pageId = text({ max: 200 });

/**
 * The topic's calls, each checked where it arrives with its row in `PROTOCOL` (the same as a page's own call), and
 * `releasePage(pageId)`: the page's last watch ended.
 */
export const PAGE_CALLS_TOPIC: { calledBy: "tab"; methods: Record<string, ArgsCheck> } = {
  calledBy: "tab",
  methods: {
    claimPageCall: (values) =>
      PROTOCOL.claimPageCall.args(values) ??
      // Over a link the claim must name its page: its page's going is what releases it.
      (typeof (values[2] as { pageId?: unknown }).pageId === "string" ? undefined : "a claim made over a follow link must name its pageId"),
    answerPageCall: PROTOCOL.answerPageCall.args,
    releasePage: args([pageId]),
  },
};

/** The same calls, made by the object of the tab that holds the lease (a device's page on the object's copy). */
export const DEVICE_PAGE_CALLS_TOPIC: { calledBy: "object"; methods: Record<string, ArgsCheck> } = {
  calledBy: "object",
  methods: PAGE_CALLS_TOPIC.methods,
};

/** Where a page's page tool calls go when the conversation runs elsewhere (the tab's side of the topic). */
export interface PageCallPort {
  claimPageCall(conversationId: number, callId: string, claim: { claimId: string; pageId: string }): Promise<PageCallClaimed>;
  answerPageCall(conversationId: number, callId: string, claimId: string, result: PageToolResult): Promise<PageCallRecord>;
  releasePage(pageId: string): Promise<void>;
}

/**
 * The holder's half (the object's end serves it, and a tab that holds the lease for its object's devices): each call
 * made by the harness that holds the lease here, and the pages that claimed through each connection remembered, so
 * that connection's close releases their claims. `LeaseNotHeld` while this place does not hold the lease.
 */
export class PageCallRelay {
  readonly #holder: () => Harness | undefined;
  readonly #place: string;
  /** The pages that claimed through each connection (the connection is the platform's: a socket). */
  readonly #pages = new Map<unknown, Set<string>>();

  /** Told the pages that claimed through a connection each time they change (decision 0051). */
  readonly #onPages: ((connection: unknown, pages: readonly string[]) => void) | undefined;

  constructor(place: string, holder: () => Harness | undefined, onPages?: (connection: unknown, pages: readonly string[]) => void) {
    this.#place = place;
    this.#holder = holder;
    this.#onPages = onPages;
  }

  /**
   * The pages that claimed through `connection` before this relay existed (a follow socket that outlived the object's
   * last instance, its pages kept with it): its `releasePage` and close release them as if claimed here.
   */
  restore(connection: unknown, pages: readonly string[]): void {
    if (pages.length === 0) return;
    const known = this.#pages.get(connection) ?? new Set<string>();
    for (const page of pages) known.add(page);
    this.#pages.set(connection, known);
  }

  async call(method: string, values: Json[], connection: unknown): Promise<Json> {
    const harness = this.#holder();
    if (!harness || harness.readOnly || harness.closed)
      throw new LeaseNotHeld(this.#place, "it does not run the conversation now; the place that holds its lease answers its page calls");
    switch (method) {
      case "claimPageCall": {
        const [conversationId, callId, claim] = values as [number, string, { claimId: string; pageId: string }];
        const claimed = await harness.conversation(conversationId).claimPageCall(callId, claim, ctx);
        let pages = this.#pages.get(connection);
        if (!pages) this.#pages.set(connection, (pages = new Set()));
        if (!pages.has(claim.pageId)) {
          pages.add(claim.pageId);
          this.#onPages?.(connection, [...pages]);
        }
        return claimed as unknown as Json;
      }
      case "answerPageCall": {
        const [conversationId, callId, claimId, result] = values as [number, string, string, PageToolResult];
        return (await harness.conversation(conversationId).answerPageCall(callId, claimId, result, ctx)) as unknown as Json;
      }
      case "releasePage": {
        const [page] = values as [string];
        // Only a page that claimed through this connection: a stranger's name releases nobody else's claims.
        const pages = this.#pages.get(connection);
        if (!pages?.delete(page)) return null;
        if (pages.size === 0) this.#pages.delete(connection);
        this.#onPages?.(connection, [...pages]);
        await harness.releasePage(page, ctx);
        return null;
      }
    }
    throw new NotAuthorized(method, "no such page tool call over a follow link.");
  }

  /**
   * The conversation a `claimPageCall` or `answerPageCall` (already checked against its row) is about, read in the
   * harness that holds the lease here: the conversation the call names if it has that page call, else undefined (no
   * such call there, another method, or no harness here holds the lease). What the follow door is told (decision 0051).
   */
  conversationOf(method: string, values: readonly Json[]): number | undefined {
    if (method !== "claimPageCall" && method !== "answerPageCall") return undefined;
    const [conversationId, callId] = values;
    const harness = this.#holder();
    if (!harness || harness.readOnly || harness.closed || typeof conversationId !== "number" || typeof callId !== "string")
      return undefined;
    try {
      return harness.conversation(conversationId).hasPageCall(callId) ? conversationId : undefined;
    } catch {
      return undefined; // no such conversation
    }
  }

  /** `connection` closed: the claims its pages made are released (they follow their replay policy, S8). */
  dropped(connection: unknown): void {
    const pages = this.#pages.get(connection);
    if (!pages) return;
    this.#pages.delete(connection);
    const harness = this.#holder();
    if (!harness || harness.readOnly || harness.closed) return; // a harness that went released every claim at its next open
    for (const page of pages) harness.releasePage(page, ctx).catch(() => {});
  }
}

/** The holder's answers as the tab checks them: they came over a socket. */
const claimed: Check = record(
  {
    callId: text({ max: 200 }),
    taskId: id,
    toolName: text({ max: 200 }),
    claimId: text({ max: 200 }),
    attempt: integer(1, Number.MAX_SAFE_INTEGER),
  },
  {
    arguments: (value, path) =>
      typeof value === "object" && value !== null && !Array.isArray(value) ? undefined : `${path} must be an object`,
  },
);
const answered: Check = (value, path) =>
  typeof value === "object" && value !== null && !Array.isArray(value)
    ? (id((value as Record<string, unknown>).taskId, `${path}.taskId`) ??
      text({ max: 200 })((value as Record<string, unknown>).callId, `${path}.callId`) ??
      literal("answered", "done")((value as Record<string, unknown>).status, `${path}.status`))
    : `${path} must be an object`;

/**
 * The port over a follow link's calls of `topic` (the tab's `FollowLink.call` of `page-calls`, the object's
 * `ObjectEnd.call` of `device-page-calls`): sent again after `ConnectionLost`, after `pause()`, until `stopped()`
 * (the claim is keyed by its `claimId`; an answer that arrived twice is `PageCallEnded` the second time and commits
 * nothing); each answer checked (`FollowMessageRefused`, shape).
 */
export function linkPageCalls(options: {
  call: (topic: string, method: string, args: Json[]) => Promise<Json>;
  topic: typeof PAGE_CALLS | typeof DEVICE_PAGE_CALLS;
  stopped: () => boolean;
  pause?: () => Promise<void>;
}): PageCallPort {
  const { call, topic, stopped, pause } = options;
  const ask = async (method: string, values: Json[], check?: Check): Promise<Json> => {
    for (;;) {
      try {
        const answer = await call(topic, method, values);
        const problem = check?.(answer, `the holder's answer to ${method}`);
        if (problem) throw new FollowMessageRefused("shape", problem);
        return answer;
      } catch (error) {
        if (!(error instanceof ConnectionLost) || stopped()) throw error;
        await pause?.();
      }
    }
  };
  return {
    claimPageCall: async (conversationId, callId, claim) =>
      (await ask("claimPageCall", [conversationId, callId, claim], claimed)) as unknown as PageCallClaimed,
    answerPageCall: async (conversationId, callId, claimId, result) =>
      (await ask("answerPageCall", [conversationId, callId, claimId, result as unknown as Json], answered)) as unknown as PageCallRecord,
    async releasePage(page) {
      await ask("releasePage", [page]);
    },
  };
}

/** A claim's `pageId` is required over a link (`InvalidArguments` for a page call made without one). */
export function requirePageId(claim: { claimId: string; pageId?: string }): { claimId: string; pageId: string } {
  if (claim.pageId === undefined) throw new InvalidArguments("claimPageCall", "a claim made through a following tab must name its pageId");
  return { claimId: claim.claimId, pageId: claim.pageId };
}
