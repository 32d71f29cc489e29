/**
 * Decision 0117, after review (L1, L2): an answered watch moved to a following copy that has not reached its id, whose
 * ids then pass it without the conversation, has ended and is told (`lost`; before, dropped silently). A subscription
 * the host ends with a retryable error after answering it (a custom host) is not left silent on the page: its socket
 * asks again.
 */
import { describe, expect, it } from "vitest";
import { socketEndpoint } from "../src/browser/socket.ts";
import { NotFound, StorageUnavailable } from "../src/errors.ts";
import { ConversationWatch } from "../src/host/conversation-watch.ts";
import { type HostEndpoint, remoteHost, type SubscriptionLost } from "../src/host/endpoint.ts";
import { scriptedSockets, settle } from "./socket-support.ts";

/** Just what ConversationWatch reads of a harness. */
function fakeHarness(ids: number[], nextId: number) {
  const commits = new Set<() => void>();
  const harness = {
    nextId,
    conversationIds: () => ids,
    conversation(id: number) {
      if (!ids.includes(id)) throw new NotFound(`Conversation ${id} does not exist.`);
      return { watch: () => () => {} };
    },
    onCommit(listener: () => void) {
      commits.add(listener);
      return () => commits.delete(listener);
    },
    commit(next: number) {
      harness.nextId = next;
      for (const listener of [...commits]) listener();
    },
  };
  return harness;
}

describe("decision 0117 after review: the host's ends are told", () => {
  it("L1: an answered watch moved to a following copy that has not reached its id waits; when the copy's ids pass it without the conversation, lost is told NotFound, once", () => {
    const lost: Error[] = [];
    const watch = new ConversationWatch({ conversationId: 7, send: () => {}, follows: () => true, lost: (error) => lost.push(error) });
    expect(watch.start(fakeHarness([7], 8) as never)).toBeUndefined(); // answered
    const next = fakeHarness([], 5); // rebuilt from an older image: id 7 not reached yet
    watch.rebind(next as never);
    expect(lost).toEqual([]); // waiting for it: fine
    next.commit(6);
    expect(lost).toEqual([]);
    next.commit(9); // passed 7 without a conversation 7
    expect(lost).toHaveLength(1);
    expect(lost[0]).toBeInstanceOf(NotFound);
    next.commit(10);
    watch.end();
    expect(lost).toHaveLength(1);
  });

  it("L2: a host ends an answered subscription with a retryable error over a socket: the page's socket asks it again (the host held it no more), and its owner is not told it ended", async () => {
    const ends: SubscriptionLost[] = [];
    let subscribes = 0;
    const endpoint: HostEndpoint = {
      call: async () => null,
      subscribe: async (_method, _args, _emit, lost) => {
        subscribes += 1;
        if (lost) ends.push(lost);
        return subscribes;
      },
      unsubscribe: () => {},
    };
    const sockets = scriptedSockets(endpoint);
    const socket = socketEndpoint(sockets.connect, { retryMs: 0 });
    const remote = remoteHost(socket);
    const told: Error[] = [];
    await remote.watchTasks(
      () => {},
      (error) => told.push(error),
    );
    await settle();
    ends[0]!(new StorageUnavailable("blip"));
    await settle();
    expect(subscribes).toBe(2);
    expect(told).toEqual([]);
    socket.close();
  });
});
