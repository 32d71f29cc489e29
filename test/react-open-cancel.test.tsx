// @vitest-environment happy-dom
import { act, cleanup, render } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import { type PendingSubscription, pendingSubscription } from "../src/host/pending-subscription.ts";
import type { ConversationView } from "../src/index.ts";
import { DurableChatTransport, HarnessProvider, useConversation } from "../src/react/index.ts";
import { FakeClient, snapshot } from "./react-fake-client.ts";

// Decision 0111: `openConversation`'s promise carries `cancel()` (as `watchConversation`'s does, decision 0107), and the
// React hooks and the chat transport call it when they no longer want a view that is still being opened — on a
// following copy, a conversation not come yet waits at the host until then (before: it stayed there until the
// conversation came, or for good).

afterEach(cleanup);

/** A client whose opens can be given up: counts each `cancel()`. */
class CancellableClient extends FakeClient {
  cancelled = 0;
  override openConversation(conversationId: number): PendingSubscription<ConversationView> {
    return pendingSubscription(super.openConversation(conversationId), () => void (this.cancelled += 1));
  }
}

function Entries({ id }: { id: number }) {
  const view = useConversation(id);
  return <p>{view ? "open" : "loading"}</p>;
}

describe("a view still being opened is given up by whoever stops wanting it (decision 0111)", () => {
  it("0111: useConversation unmounted while its open waits gives the open up (before: nothing asked the host to stop waiting)", async () => {
    const client = new CancellableClient();
    client.hold(); // the host has not answered: a copy waiting for the conversation
    const page = render(
      <HarnessProvider client={client}>
        <Entries id={1} />
      </HarnessProvider>,
    );
    page.unmount();
    expect(client.cancelled).toBe(1);
    // Opened and unmounted: its cancel is harmless, the view closes once.
    const again = new CancellableClient();
    const opened = render(
      <HarnessProvider client={again}>
        <Entries id={1} />
      </HarnessProvider>,
    );
    await act(async () => again.view(1, snapshot(1)));
    opened.unmount();
    expect(again.listenerCount()).toBe(0);
  });

  it("0111 review: a view that opened is only closed on unmount and on the transport's close, not given up as well (before: cancel() after the close too: a client whose late cancel unsubscribes did it twice)", async () => {
    const client = new CancellableClient();
    const page = render(
      <HarnessProvider client={client}>
        <Entries id={1} />
      </HarnessProvider>,
    );
    await act(async () => client.view(1, snapshot(1)));
    page.unmount();
    expect(client.listenerCount()).toBe(0);
    expect(client.cancelled).toBe(0);
    const transport = new DurableChatTransport({ client, conversationId: 1 });
    await act(async () => {
      const stop = transport.onTranscriptChange(() => {});
      client.view(1, snapshot(1));
      await stop;
    });
    transport.close();
    expect(client.listenerCount()).toBe(0);
    expect(client.cancelled).toBe(0);
  });

  it("0111: the chat transport closed while its view is being opened gives the open up", async () => {
    const client = new CancellableClient();
    client.hold();
    const transport = new DurableChatTransport({ client, conversationId: 1 });
    void transport.onTranscriptChange(() => {}).catch(() => {});
    transport.close();
    expect(client.cancelled).toBe(1);
  });
});
