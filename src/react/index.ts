/**
 * pi-durable-web/react: hooks over the page's harness client, and a `useChat` transport (React 19 and the AI
 * SDK are optional peers of this entry point only).
 */

export { NoHarnessProvider, NotReady, UnsupportedChatRequest } from "../errors.ts";
export { DurableChatTransport, type DurableChatTransportOptions } from "./chat-transport.ts";
export type { ChatClient, ReactHarnessClient, Unsubscribe } from "./client.ts";
export {
  type ApprovalCard,
  type HarnessStatusResult,
  type SubmitOptions,
  type TaskFilter,
  useConversation,
  useConversationView,
  useDecide,
  useHarnessStatus,
  useInspection,
  usePendingApprovals,
  useReports,
  useSubmit,
  useTasks,
} from "./hooks.ts";
export { type PageToolRequest, usePageTool } from "./page-tool.ts";
export { HarnessProvider, type HarnessProviderProps, useHarnessClient } from "./provider.ts";
export type { DurableDataTypes, RunFailureData } from "./reply.ts";
export { type DurableUIMessage, toUIMessages } from "./ui-messages.ts";
