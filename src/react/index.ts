/**
 * pi-durable-web/react: hooks over the page's harness client, and a `useChat` transport (React 19 and the AI
 * SDK are optional peers of this entry point only).
 */
export { HarnessProvider, useHarnessClient, type HarnessProviderProps } from "./provider.ts";
export {
  useConversation,
  useConversationView,
  useHarnessStatus,
  useInspection,
  useReports,
  useSubmit,
  useTasks,
  type HarnessStatusResult,
  type SubmitOptions,
  type TaskFilter,
} from "./hooks.ts";
export { DurableChatTransport, type DurableChatTransportOptions } from "./chat-transport.ts";
export { toUIMessages, type DurableUIMessage } from "./ui-messages.ts";
export type { DurableDataTypes, RunFailureData } from "./reply.ts";
export type { ChatClient, ReactHarnessClient, Unsubscribe } from "./client.ts";
export { NoHarnessProvider, NotReady, UnsupportedChatRequest } from "./errors.ts";
