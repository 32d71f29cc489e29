// @vitest-environment happy-dom
import { useChat } from "@ai-sdk/react";
import { act, cleanup, render, waitFor } from "@testing-library/react";
import { useEffect } from "react";
import { afterEach, describe, expect, it } from "vitest";
import { MemoryStorage } from "../src/index.ts";
import type { DurableChatTransport, DurableUIMessage } from "../src/react/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { type AgentOpened, answer, createWorld, fauxAssistantMessage, openAgent, ScriptedModels, until } from "./agent-support.ts";
import { transportFor } from "./react-support.ts";
import { ctx } from "./support.ts";

afterEach(cleanup);

/** What useChat holds, as the page would render it. */
interface Seen {
  messages: DurableUIMessage[];
  status: string;
  error: string | undefined;
  send?: (text: string) => void;
}

function Chat({ transport, initial, seen }: { transport: DurableChatTransport; initial: DurableUIMessage[]; seen: Seen }) {
  const { messages, sendMessage, status, error } = useChat<DurableUIMessage>({ id: "chat", transport, messages: initial, resume: true });
  useEffect(() => {
    seen.messages = messages;
    seen.status = status;
    seen.error = error?.message;
    seen.send = (text) => void sendMessage({ text }).catch(() => {});
  });
  return null;
}

async function mount(opened: AgentOpened): Promise<Seen> {
  const transport = transportFor(opened);
  const seen: Seen = { messages: [], status: "", error: undefined };
  render(<Chat transport={transport} initial={await transport.loadMessages()} seen={seen} />);
  await waitFor(() => expect(seen.send).toBeDefined());
  return seen;
}

/** The transcript a reload gives: a new transport's messages from the committed view. */
const reloaded = (opened: AgentOpened) => transportFor(opened).loadMessages();

/** The run is over and useChat has taken in its last chunk. */
async function settled(opened: AgentOpened, seen: Seen): Promise<void> {
  await until(async () => (await opened.root.view(ctx)).live.run === undefined, "the run ended");
  await waitFor(() => expect(["ready", "error"]).toContain(seen.status));
}

const failing = (error: string) => fauxAssistantMessage([], { stopReason: "error", errorMessage: error });
const partTypes = (message: DurableUIMessage | undefined) => message?.parts.map((part) => part.type);

describe("useChat: the live message is the reloaded message, part by part, after every kind of recovery", () => {
  it("S9 interrupted: a crash mid-answer, the retry's answer; no data-retry part left in the live message", async () => {
    const world = createWorld();
    const first = await openAgent(new MemoryStorage(), { models: new ScriptedModels([{ hang: "Hel" }]), world });
    await first.root.submit({ type: "input", content: "say hello", requestId: "m1" }, ctx);
    await until(async () => (await first.root.view(ctx)).live.generation?.requestedAt !== undefined, "the request is in flight");
    first.clock.advance(1000);
    await until(async () => (await first.root.view(ctx)).live.generation?.message !== undefined, "the partial is persisted");
    const second = await openAgent(MemoryStorage.fromImage(await first.storage.exportImage()), {
      models: new ScriptedModels([answer("Hello!")]),
      world,
      clock: createManualClock(first.clock.now()),
    });
    const seen = await mount(second);
    await waitFor(() => expect(seen.messages.at(-1)?.parts.some((part) => part.type === "data-retry")).toBe(true));
    await act(async () => second.clock.advance(2000));
    await settled(second, seen);
    expect(partTypes(seen.messages.at(-1))).toEqual(["step-start", "text", "data-aborted", "step-start", "text"]);
    expect(seen.messages).toEqual(await reloaded(second));
  });

  it("S9 retried: a transient model error (503), the retry answers; the retry notice leaves the live message", async () => {
    const opened = await openAgent(new MemoryStorage(), {
      models: new ScriptedModels([failing("503 Service Unavailable: overloaded"), answer("Fine now.")]),
      world: createWorld(),
    });
    const seen = await mount(opened);
    act(() => seen.send!("hello"));
    await waitFor(() => expect(seen.messages.at(-1)?.parts.some((part) => part.type === "data-retry")).toBe(true));
    await act(async () => opened.clock.advance(2000));
    await settled(opened, seen);
    expect(seen.error).toBeUndefined();
    expect(partTypes(seen.messages.at(-1))).toEqual(["step-start", "data-aborted", "step-start", "text"]);
    expect(seen.messages).toEqual(await reloaded(opened));
  });

  it("S9 failed: retries used up; useChat's error is set live and again on load, and the answer stays failed after a later run", async () => {
    const opened = await openAgent(new MemoryStorage(), {
      models: new ScriptedModels([failing("503 overloaded"), failing("503 overloaded"), answer("Answered.")]),
      world: createWorld(),
      settings: { retry: { maxRetries: 1 } },
    });
    const seen = await mount(opened);
    act(() => seen.send!("hello"));
    await act(async () => {
      await until(async () => (await opened.root.view(ctx)).live.generation?.retry !== undefined, "the retry waits");
      opened.clock.advance(2000);
    });
    await settled(opened, seen);
    expect(seen.error).toBe("503 overloaded");
    expect(partTypes(seen.messages.at(-1))).toEqual(["step-start", "data-aborted", "step-start", "data-aborted", "data-run-failure"]);
    expect(seen.messages).toEqual(await reloaded(opened));

    // A reload: the transcript brings the failure, and useChat({ resume: true }) sets its error again.
    cleanup();
    const again = await mount(opened);
    await waitFor(() => expect(again.error).toBe("503 overloaded"));
    expect(again.messages).toEqual(await reloaded(opened));

    // A later run is answered; the failed answer still reads failed, live and after a reload.
    act(() => again.send!("once more"));
    await waitFor(() => expect(again.messages.at(-1)?.parts.some((part) => part.type === "text")).toBe(true));
    await settled(opened, again);
    expect(again.error).toBeUndefined();
    const transcript = await reloaded(opened);
    expect(transcript.map((message) => message.role)).toEqual(["user", "assistant", "user", "assistant"]);
    expect(transcript[1]!.parts.at(-1)).toEqual({
      type: "data-run-failure",
      id: expect.stringMatching(/^run-failure-/),
      data: { reason: "model_error", message: "503 overloaded" },
    });
    expect(again.messages).toEqual(transcript);
  });

  it("aborted: the run is aborted mid-answer; the live and the reloaded message both end with the run failure", async () => {
    const opened = await openAgent(new MemoryStorage(), { models: new ScriptedModels([{ hang: "Half an ans" }]), world: createWorld() });
    const seen = await mount(opened);
    act(() => seen.send!("hello"));
    await until(async () => (await opened.root.view(ctx)).live.generation?.requestedAt !== undefined, "the request is in flight");
    await act(async () => {
      opened.clock.advance(1000);
      await opened.root.abort(ctx);
    });
    await settled(opened, seen);
    expect(partTypes(seen.messages.at(-1))?.at(-1)).toBe("data-run-failure");
    expect(seen.error).toBe("The run was aborted.");
    expect(seen.messages).toEqual(await reloaded(opened));
  });
});

describe("transport.onTranscriptChange (every tab's useChat live)", () => {
  it("hands over the transcript after a change made elsewhere (another tab's input and its answer), equal to a reload's", async () => {
    const opened = await openAgent(new MemoryStorage(), { models: new ScriptedModels([answer("Hi, other tab.")]), world: createWorld() });
    const transport = transportFor(opened);
    const seen: DurableUIMessage[][] = [];
    const stop = await transport.onTranscriptChange((messages) => seen.push(messages));
    const elsewhere = await opened.root.submit({ type: "input", content: "from another tab", requestId: "tab-2-m1" }, ctx);
    await elsewhere.wait(ctx);
    await waitFor(() => expect(seen.at(-1)?.map((message) => message.role)).toEqual(["user", "assistant"]));
    expect(seen.at(-1)![0]!.id).toBe("tab-2-m1");
    expect(seen.at(-1)).toEqual(await reloaded(opened));
    stop();
    const count = seen.length;
    await (await opened.root.submit({ type: "input", content: "after the stop" }, ctx)).wait(ctx);
    expect(seen.length).toBe(count);
  });
});
