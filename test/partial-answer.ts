import {
  type Api,
  type AssistantMessage,
  type AssistantMessageEventStream,
  createAssistantMessageEventStream,
  type Model,
} from "@earendil-works/pi-ai";
import { zeroUsage } from "../src/agent/conversation/documents.ts";

/**
 * A model request that streams `text` and then stays in flight: in a microtask it pushes the start and the
 * text, then calls `streamed` with the stream and the partial message (to end it, or to leave it hanging).
 * Shared by the Node tests and the Worker the edge tests run in workerd.
 */
export function partialAnswer(
  model: Model<Api>,
  text: string,
  streamed: (stream: AssistantMessageEventStream, partial: AssistantMessage) => void,
): AssistantMessageEventStream {
  const stream = createAssistantMessageEventStream();
  const base: AssistantMessage = {
    role: "assistant",
    content: [],
    api: model.api,
    provider: model.provider,
    model: model.id,
    usage: zeroUsage(),
    stopReason: "stop",
    timestamp: 0,
  };
  queueMicrotask(() => {
    stream.push({ type: "start", partial: { ...base } });
    stream.push({ type: "text_start", contentIndex: 0, partial: { ...base, content: [{ type: "text", text: "" }] } });
    const partial: AssistantMessage = { ...base, content: [{ type: "text", text }] };
    stream.push({ type: "text_delta", contentIndex: 0, delta: text, partial });
    streamed(stream, partial);
  });
  return stream;
}
