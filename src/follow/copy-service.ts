/**
 * The copy of a conversation served live to other devices (issue 27 item 2, decision 0034): the same
 * `HarnessService` a host serves, over a read-only harness on this place's copy that follows the holder's pushed
 * transactions (`harness.follow`), so every read, view and subscription is the copy's and moves on as the holder's
 * commits arrive. The writes another device may make of a conversation — `submit`, `abortConversation`, `decide`
 * (the rows with `forwarded: true`) — are forwarded to the place that holds the lease under their key (minted here
 * when the caller sent none), sent again until answered, and answered once; every other write is `RunsElsewhere`.
 * When this place takes the lease, `hold` hands the service to its own host: subscriptions move over, forwards still
 * waiting are made there under the same key, and from then on everything is answered by the harness that runs.
 */
import type { Clock } from "../base/clock.ts";
import { BACKGROUND_CONTEXT as ctx } from "../base/context.ts";
import { type IdSource, randomIds } from "../base/ids.ts";
import { ConnectionLost, HarnessClosed, ReadOnlySession, RunsElsewhere } from "../errors.ts";
import type { Harness } from "../harness.ts";
import type { ServedHost } from "../host/host.ts";
import { keepCancel } from "../host/pending-subscription.ts";
import { type HarnessService, type HarnessStatus, type HeldBy, type MethodName, PROTOCOL } from "../host/protocol.ts";
import { CopySubscriptions } from "./copy-subscriptions.ts";
import { answerForwarded, type ForwardAnswer, type ForwardedWrite, type HolderPort, holderUnreachable } from "./forwarding.ts";
import type { LoggedBatch } from "./handover.ts";
import { answeredInSwitch } from "./switch-answers.ts";

/** How often a forward that got no answer is sent again, on the harness clock (the holder dedupes by key). */
export const FORWARD_RESEND_MS = 1_000;
/**
 * At most this many forwards wait for the holder at once (as `OutgoingCalls`' own bound): while it is unreachable each
 * waits and is sent again, and a device must not pile up writes without end. A new key past it is `ConnectionLost`
 * at once, nothing sent: the caller sends it again later, as after any lost connection.
 */
export const MAX_FORWARDS = 256;

export interface CopyServiceOptions {
  /** The host over this place's copy, opened read-only (`createHost({ …, harness: { …, readOnly: true } })`). */
  copy: ServedHost;
  /** The place that holds the lease, as the follow link reaches it. */
  holder: HolderPort;
  /** The harness clock: forwards are sent again on it. */
  clock: Clock;
  /** Where the conversation runs now, for `RunsElsewhere` ("the tab, lease epoch 3"). */
  where?: () => string;
  /**
   * Who holds the lease while the copy follows it, as this place's own record says (decision 0067): the copy's ready
   * status carries it as `heldBy`. Undefined (or returning undefined): the status names no holder.
   */
  heldBy?: () => HeldBy | undefined;
  /** Mints the key of a forwarded write sent without one. Default `randomIds` (decision 0078). */
  newKey?: IdSource;
  /**
   * Whether this place is in its switch (`ObjectEnd.switching`): handed the lease back, its held host closed, the next
   * instance to follow. Then what that host refuses `HarnessClosed` is `NotReady` to every caller of `service`
   * (switch-answers.ts, decision 0139). Default: never (a close is a close).
   */
  switching?: () => boolean;
}

export interface CopyService {
  /** What this place serves to devices (put it behind the doors like any host's service). */
  readonly service: HarnessService;
  /** Applies one transaction the holder pushed, through the follower harness (see `harness.follow`). */
  follow(batch: LoggedBatch): Promise<void>;
  /**
   * This place took the lease and `host` runs the conversation here: from now on it answers everything. A host whose
   * harness opened read-only (another place took the lease first) changes nothing: the copy goes on following.
   */
  hold(host: ServedHost): Promise<void>;
  /** True once `hold` handed the service to the holding host. */
  readonly holding: boolean;
  /**
   * This place's lease record names another holder (decision 0075): every status subscriber is told the status again,
   * with its `heldBy` read anew — a lease taken or released with no transaction after it reaches the pages at once,
   * not at the copy's next status. Nothing once this place holds the lease (its host's status says `here`).
   */
  holderChanged(): void;
  /**
   * This place's switch may have begun or ended (`switching`, decision 0145): every status subscriber is told the status
   * again, `opening` while it lasts (switch-answers.ts), the host's own after it. Told only when it changed.
   */
  switchMoved(): void;
  /** Ends every forward and subscription and closes the current host. */
  close(): Promise<void>;
}

/** A forward on its way: one per key, however often it is asked for or sent. */
interface Forward {
  write: ForwardedWrite;
  promise: Promise<ForwardAnswer>;
  settle(outcome: { answer: ForwardAnswer } | { error: unknown }): void;
  cancel?: () => void;
}

type AnyMethod = (...args: unknown[]) => unknown;

export function createCopyService(options: CopyServiceOptions): CopyService {
  const follower = options.copy.ready;
  const where = options.where ?? (() => "the place that holds its lease");
  const newKey = options.newKey ?? randomIds;
  let current: ServedHost = options.copy;
  let holding = false;
  let closed = false;
  const forwards = new Map<string, Forward>();

  // A submission is answered once the copy holds it: then `waitForSubmission` and every view find it here.
  follower.then(
    (harness) =>
      harness.onCommit(({ batch }) => {
        for (const record of batch.submissions) {
          if (record.requestId === undefined) continue;
          const answer: ForwardAnswer = { method: "submit", submissionId: record.id };
          forwards.get(`submit/${record.conversationId}/${record.requestId}`)?.settle({ answer });
        }
      }),
    () => {},
  );

  /** Calls `method` on the current host; a read cut off by the move to the holding host is asked there again. */
  const delegate = (method: MethodName, args: unknown[]): unknown => {
    const host = current;
    const refused = (error: unknown): unknown => {
      if (host !== current && error instanceof HarnessClosed && PROTOCOL[method].retry === "safe") return delegate(method, args);
      if (host === options.copy && error instanceof ReadOnlySession) throw new RunsElsewhere(method, where());
      throw error;
    };
    try {
      const result = (host.service[method] as AnyMethod)(...args);
      // A watch that waits (decision 0107) is still given up through what is returned.
      return result instanceof Promise ? keepCancel(result, result.catch(refused)) : result;
    } catch (error) {
      return refused(error);
    }
  };
  const serve =
    <M extends MethodName>(method: M) =>
    (...args: Parameters<HarnessService[M]>) =>
      delegate(method, args) as ReturnType<HarnessService[M]>;

  const subscriptions = new CopySubscriptions(delegate);
  const subscribe =
    <M extends MethodName>(method: M) =>
    (...all: Parameters<HarnessService[M]>) =>
      subscriptions.subscribe(method, all) as ReturnType<HarnessService[M]>;

  /** Sends `write` to the holder until it is answered (or refused), at most one forward per `key` at a time. */
  const forward = (key: string, write: ForwardedWrite, copy: Harness): Promise<ForwardAnswer> => {
    const existing = forwards.get(key);
    if (existing) return existing.promise;
    if (forwards.size >= MAX_FORWARDS) return Promise.reject(new ConnectionLost());
    let settle!: Forward["settle"];
    const promise = new Promise<ForwardAnswer>((resolve, reject) => {
      settle = (outcome) => {
        if (forwards.get(key) !== entry) return;
        forwards.delete(key);
        entry.cancel?.();
        if ("answer" in outcome) resolve(outcome.answer);
        else reject(outcome.error);
      };
    });
    const entry: Forward = { write, promise, settle: (outcome) => settle(outcome) };
    forwards.set(key, entry);
    const send = () => {
      if (forwards.get(key) !== entry || holding) return;
      entry.cancel = options.clock.setTimer(FORWARD_RESEND_MS, send);
      options.holder.forward(write).then(
        async (answer) => {
          if (answer.method !== "submit") return entry.settle({ answer });
          // Answered; the copy holds it once the holder's commit arrives (it may have arrived first).
          entry.cancel?.();
          const record = await copy.storage.getSubmission(answer.submissionId);
          if (record) entry.settle({ answer });
        },
        (error: unknown) => {
          if (!holderUnreachable(error)) entry.settle({ error });
        },
      );
    };
    send();
    return promise;
  };

  /** The copy's harness, for a write from a device (`NotFound` for a conversation the copy does not hold). */
  const copyFor = async (conversationId: number): Promise<Harness> => {
    const harness = await follower;
    harness.conversation(conversationId);
    return harness;
  };

  /**
   * The copy's ready status says where the agent runs: elsewhere (the holding host's says here), and who holds the
   * lease, read from this place's own record at each status (decision 0067).
   */
  const located = (status: HarnessStatus): HarnessStatus => {
    if (holding || status.kind !== "ready" || status.runs !== undefined) return status;
    const heldBy = options.heldBy?.();
    return { ...status, runs: "elsewhere", ...(heldBy ? { heldBy } : {}) };
  };

  const service: HarnessService = {
    status: () => located(delegate("status", []) as HarnessStatus),
    lifeLock: serve("lifeLock"),
    onStatus: (listener, lost) => subscribe("onStatus")((status) => listener(located(status)), lost),
    onReport: subscribe("onReport"),
    watchTasks: subscribe("watchTasks"),
    createTask: serve("createTask"),
    getTask: serve("getTask"),
    waitForTask: serve("waitForTask"),
    abortTask: serve("abortTask"),
    inspect: serve("inspect"),
    resume: serve("resume"),
    query: serve("query"),
    exportDatabase: serve("exportDatabase"),
    armCrashPoint: serve("armCrashPoint"),
    disarmCrashPoint: serve("disarmCrashPoint"),
    close: () => copyService.close(),
    requestTakeover() {},
    leave: async () => {},
    async runHere() {},
    async retryRebuild() {},
    rootConversation: serve("rootConversation"),
    createConversation: serve("createConversation"),
    listConversations: serve("listConversations"),
    configure: serve("configure"),
    forks: serve("forks"),
    dismissFork: serve("dismissFork"),
    async submit(conversationId, draft) {
      if (holding) return current.service.submit(conversationId, draft);
      const copy = await copyFor(conversationId);
      const requestId = draft.requestId ?? newKey();
      const stored = await copy.storage.findSubmission(conversationId, requestId);
      if (stored && stored.type === draft.type) return stored.id; // another type: the holder says why not
      const write: ForwardedWrite = { method: "submit", args: [conversationId, { ...draft, requestId }] };
      const answer = await forward(`submit/${conversationId}/${requestId}`, write, copy);
      return (answer as { submissionId: number }).submissionId;
    },
    waitForSubmission: serve("waitForSubmission"),
    async abortConversation(conversationId) {
      if (holding) return current.service.abortConversation(conversationId);
      const copy = await copyFor(conversationId);
      // The run and compactions the copy shows: the forward names them, so a late duplicate stops nothing newer.
      const tasks = (await copy.inspect(ctx)).tasks
        .map((task) => task.record)
        .filter(
          (record) => record.conversationId === conversationId && (record.kind === "pi.generation" || record.kind === "pi.compaction"),
        )
        .map((record) => record.id);
      if (tasks.length === 0) return;
      await forward(
        `abortConversation/${conversationId}/${tasks.join(",")}`,
        { method: "abortConversation", args: [conversationId, tasks] },
        copy,
      );
      // Answered from the copy: once the holder's commits that ended them arrived.
      for (const id of tasks) await service.waitForTask(id);
    },
    compact: serve("compact"),
    watchConversation: subscribe("watchConversation"),
    conversationEntries: serve("conversationEntries"),
    async decide(conversationId, call, decision) {
      if (holding) return current.service.decide(conversationId, call, decision);
      const copy = await copyFor(conversationId);
      const keyed = { ...decision, decisionId: decision.decisionId ?? newKey() };
      const answer = await forward(
        `decide/${conversationId}/${keyed.decisionId}`,
        { method: "decide", args: [conversationId, call, keyed] },
        copy,
      );
      return (answer as { record: Awaited<ReturnType<HarnessService["decide"]>> }).record;
    },
    pendingApprovals: serve("pendingApprovals"),
    watchPageCalls: subscribe("watchPageCalls"),
    claimPageCall: serve("claimPageCall"),
    answerPageCall: serve("answerPageCall"),
    call: serve("call"),
  };

  /** Tells every status subscriber the status now (they may have missed what changed it: no commit came with it). */
  const tellStatus = () => {
    if (closed) return;
    let status: HarnessStatus;
    try {
      status = delegate("status", []) as HarnessStatus;
    } catch {
      return; // a host that cannot say its status now tells it when it can
    }
    for (const listener of subscriptions.listenersOf("onStatus")) {
      try {
        (listener as (status: HarnessStatus) => void)(status);
      } catch {
        // One page's listener failing (its socket gone) does not keep the others from it.
      }
    }
  };

  const copyService: CopyService = {
    service: options.switching ? answeredInSwitch(service, options.switching) : service,
    async follow(batch) {
      if (holding) throw new HarnessClosed();
      await (await follower).follow(batch, ctx);
    },
    get holding() {
      return holding;
    },
    holderChanged() {
      if (!holding) tellStatus();
    },
    switchMoved: () => tellStatus(),
    async hold(host) {
      const harness = await host.ready;
      // A takeover that found the lease taken after all opened read-only: this place goes on following.
      if (holding || closed || harness.readOnly) return;
      holding = true;
      current = host;
      // Subscriptions move over; one the holder refuses has ended, and its owner is told (decision 0117).
      subscriptions.moveTo(host);
      // What waits for an answer is made here, under the same key: a write the old holder made and pushed is found.
      for (const entry of forwards.values()) {
        entry.cancel?.();
        answerForwarded(harness, entry.write, ctx).then(
          (answer) => entry.settle({ answer }),
          (error: unknown) => entry.settle({ error }),
        );
      }
      await (await follower).close(ctx);
    },
    async close() {
      if (closed) return;
      closed = true;
      for (const entry of [...forwards.values()]) entry.settle({ error: new HarnessClosed() });
      subscriptions.end(new HarnessClosed());
      await current.service.close();
    },
  };
  return copyService;
}
