/**
 * The host's calls that only reach the open harness (decision 0057 split them out of host.ts): tasks, conversations,
 * their views and the app's extra methods. A write waits for a reopen under way (`whenOpen`); a read (`read`: getTask,
 * inspect, listConversations, pendingApprovals, conversationEntries, and rootConversation when the root exists and no
 * agent is given) answers from the copy open now (decisions 0127, 0147).
 * The host keeps the harness's life (open, reopen, close, the lease's moves) to itself.
 */
import { coalesceLiveFrames, type LivePace } from "../agent/view/live-frames.ts";
import { BACKGROUND_CONTEXT as ctx } from "../base/context.ts";
import type { Json } from "../base/json.ts";
import { safely } from "../base/safely.ts";
import { HarnessClosed, NotFound, UnknownAppMethod, UnknownTaskKind } from "../errors.ts";
import type { Harness } from "../harness.ts";
import { checkJson } from "../limits.ts";
import { ConversationWatch } from "./conversation-watch.ts";
import { pendingSubscription } from "./pending-subscription.ts";
import type { HarnessService } from "./protocol.ts";

/** An extra method the page can call with `client.call(name, ...args)`; it gets the open harness. */
export type HostMethod = (harness: Harness, ...args: Json[]) => unknown;

type HarnessCallName =
  | "createTask"
  | "getTask"
  | "waitForTask"
  | "abortTask"
  | "inspect"
  | "rootConversation"
  | "createConversation"
  | "listConversations"
  | "configure"
  | "submit"
  | "waitForSubmission"
  | "abortConversation"
  | "decide"
  | "pendingApprovals"
  | "compact"
  | "watchConversation"
  | "conversationEntries"
  | "call";

export interface HarnessCallsOptions {
  /** The open harness once a reopen under way is done (a page's call made in that window waits for it). */
  whenOpen(): Promise<Harness>;
  /** A read (decision 0127): `answer` asked of the copy open now, even while a reopen is under way. */
  read<T>(answer: (copy: Harness) => T | Promise<T>): Promise<T>;
  /** The open harness now, or `DurableError` (not open). */
  requireHarness(): Harness;
  /**
   * The open copy a watch starts on now (decision 0134): the ready harness, or the read-only copy a reopen keeps open
   * while it replaces it; undefined when none is.
   */
  copy(): Harness | undefined;
  /** Whether the host is opening its harness again (a watch made meanwhile moves to the next one). */
  reopening(): boolean;
  /** The page's views: each `rebind` moves one to the harness the host opens next. */
  rebinds: Set<(next: Harness | Error) => void>;
  methods: Record<string, HostMethod> | undefined;
  liveFrames: Omit<LivePace, "now"> | undefined;
  now: () => number;
  /** Whether `harness` is a copy that follows another place (a watch there waits for a conversation yet to arrive). */
  follows(harness: Harness): boolean;
}

/** The calls, and how many conversation views they hold (for `listenerCount`). */
export function harnessCalls(options: HarnessCallsOptions): {
  calls: Pick<HarnessService, HarnessCallName>;
  views(): number;
} {
  const { whenOpen, read, requireHarness } = options;
  let views = 0;
  const calls: Pick<HarnessService, HarnessCallName> = {
    async createTask(kind, input, createOptions = {}) {
      const open = await whenOpen();
      const definition = open.registry.task(kind);
      if (!definition)
        throw new UnknownTaskKind(
          kind,
          open.registry.extensions.flatMap((e) => (e.tasks ?? []).map((t) => t.name)),
        );
      const conversation =
        createOptions.conversationId !== undefined ? open.conversation(createOptions.conversationId) : await open.root(ctx);
      return conversation.commit(
        (tx) => tx.createTask(definition, input, createOptions.key !== undefined ? { key: createOptions.key } : {}),
        ctx,
      );
    },
    getTask: (id) => read((copy) => copy.getTask(id, ctx)),
    waitForTask: async (id) => (await whenOpen()).waitForTask(id, ctx),
    abortTask: async (id) => (await whenOpen()).abortTask(id, ctx),
    inspect: () => read((copy) => copy.inspect(ctx)),
    async rootConversation(agent) {
      // With nothing to configure, a root the copy holds is a read (decision 0147): its id is answered at once, as
      // listConversations is; creating it or applying `agent` is a write and waits for a reopen under way.
      const held = agent ? undefined : await read((copy) => copy.rootConversationId);
      return held ?? (await (await whenOpen()).root(ctx, agent ? { agent } : {})).id;
    },
    async createConversation(agent) {
      return (await (await whenOpen()).createConversation(agent ? { agent } : {}, ctx)).id;
    },
    listConversations: () =>
      read((open) =>
        open
          .conversationIds()
          .sort((a, b) => a - b)
          .map((id) => {
            const conversation = open.conversation(id);
            return { id, agent: conversation.agent(), busy: conversation.busy };
          }),
      ),
    configure: async (conversationId, change) => (await whenOpen()).conversation(conversationId).configure(change, ctx),
    async submit(conversationId, draft) {
      return (await (await whenOpen()).conversation(conversationId).submit(draft, ctx)).id;
    },
    async waitForSubmission(submissionId) {
      return (await (await whenOpen()).submission(submissionId, ctx)).wait(ctx);
    },
    abortConversation: async (conversationId) => (await whenOpen()).conversation(conversationId).abort(ctx),
    decide: async (conversationId, call, decision) => (await whenOpen()).conversation(conversationId).decide(call, decision, ctx),
    pendingApprovals: (conversationId) => read((copy) => copy.conversation(conversationId).pendingApprovals()),
    compact: async (conversationId, instructions) =>
      (await whenOpen()).conversation(conversationId).compact(instructions ? { instructions } : {}, ctx),
    watchConversation(conversationId, listener, lost) {
      const pace = options.liveFrames && { ...options.liveFrames, now: options.now };
      const send = coalesceLiveFrames((update) => safely(() => listener(update)), pace);
      // On a copy that follows, a conversation it has not received yet is waited for (decision 0103). One moved to a
      // harness that lacks it ends, and its owner is told (decision 0117).
      const watch = new ConversationWatch({
        conversationId,
        send,
        follows: options.follows,
        lost: (error) => {
          unsubscribe();
          safely(() => lost?.(error));
        },
      });
      const rebind = (next: Harness | Error) => watch.rebind(next);
      views += 1;
      let subscribed = true;
      const unsubscribe = () => {
        if (!subscribed) return;
        subscribed = false;
        views -= 1;
        options.rebinds.delete(rebind);
        watch.end();
      };
      /** Starts the watch on `on`; from then on it moves with each reopen (`rebind`). */
      const begin = (on: Harness) => {
        const waiting = watch.start(on);
        options.rebinds.add(rebind);
        return waiting;
      };
      // While the host reopens (a take-back, a rebuild), the watch starts on the copy open meanwhile and moves with the
      // reopen as every view does (decision 0134; before, it waited for the harness opened next — over a silent link
      // for the call's bound or longer — and the page's view stood still). With no copy open (a stopped writer, a copy
      // opening, a rebuild whose `run` does not say `closesCopy`: then link calls too, host-options.ts) it starts on the
      // next one, and is answered only then (decision 0107): a conversation that will not come there is refused by this
      // same promise.
      const now = options.copy();
      let waiting: Promise<void> | undefined;
      if (now || !options.reopening()) {
        try {
          waiting = begin(now ?? requireHarness());
        } catch (error) {
          unsubscribe();
          throw error;
        }
        if (!waiting) return unsubscribe;
      } else {
        waiting = (async () => {
          for (;;) {
            // The copy readable once the reopen under way opened one (`read` waits for the whole reopen: a rebuild's
            // link calls too when its `run` does not say `closesCopy`); the read's error when none will be (the host
            // closed, not open).
            const on = await read((copy) => {
              if (copy.closed) throw new HarnessClosed();
              return copy;
            });
            if (!subscribed) throw new NotFound(`Conversation ${conversationId} is no longer watched.`);
            if (!on.closed) return begin(on); // closed since (replaced): the next one
          }
        })();
      }
      // Given up (`cancel`, decision 0107: the page went away before it was answered), it holds nothing more here.
      return pendingSubscription(
        waiting.then(
          () => unsubscribe,
          (error: unknown) => {
            unsubscribe();
            throw error;
          },
        ),
        unsubscribe,
      );
    },
    conversationEntries: (conversationId, beforeId, limit) =>
      read((copy) => copy.conversation(conversationId).entriesBefore(beforeId, limit, ctx)),
    async call(method, ...args) {
      const open = await whenOpen(); // as every call: one made while the host reopens waits for it (decision 0053)
      // Own properties only: `constructor`, `toString` or `__proto__` are no app method.
      const methods = options.methods;
      const implementation = methods && typeof method === "string" && Object.hasOwn(methods, method) ? methods[method] : undefined;
      if (typeof implementation !== "function") throw new UnknownAppMethod(String(method));
      checkJson(args, open.settings.limits, () => `The argument list of ${method}`);
      return implementation(open, ...args);
    },
  };
  return { calls, views: () => views };
}
