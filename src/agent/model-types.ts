/**
 * The shapes of pi-ai's messages, content and model catalogue, as the library's own public types name them.
 * Declared here rather than imported: every type pi-ai exports is declared beside its providers' options,
 * whose SDK types reach `@types/node`, so a Worker project compiling our `.d.ts` against the Workers types
 * (skipLibCheck off) would meet Node's globals (about 150 errors). Each shape is what the library reads
 * and writes, pi-ai's without the fields it never reads (diagnostics, deferred handles, nested calls, a
 * system message's tool changes): pi-ai's values are accepted where these are asked for (a `createModels()`
 * catalogue as `HarnessOptions.models`, a `Model` in `configure`), and what the library hands out reads as
 * pi-ai's (test/model-types.test.ts checks both directions against the pi-ai version installed). The few
 * pi-ai functions the agent calls take these through `pi-calls.ts`.
 */

/** JSON as a model's tool call carries it (arrays read-only, as pi-ai types them). */
export type ModelJson = null | boolean | number | string | readonly ModelJson[] | { [key: string]: ModelJson };

/** Text in a message. */
export interface TextContent {
  type: "text";
  text: string;
  textSignature?: string;
}

/** A model's reasoning, as its provider returns it (`redacted`: the text is withheld, the signature kept). */
export interface ThinkingContent {
  type: "thinking";
  thinking: string;
  thinkingSignature?: string;
  redacted?: boolean;
}

/** An image as base64 `data` with its `mimeType`. */
export interface ImageContent {
  type: "image";
  data: string;
  mimeType: string;
}

/** A call of a tool the model asked for; `argumentsError` when its arguments were not a JSON object. */
export interface ToolCall {
  type: "toolCall";
  id: string;
  name: string;
  arguments: { [key: string]: ModelJson };
  thoughtSignature?: string;
  namespace?: string;
  argumentsError?: string;
}

/** Tokens and cost of one answer (`cost` in the catalogue's currency, `total` the best known). */
export interface Usage {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
  cacheWrite1h?: number;
  reasoning?: number;
  totalTokens: number;
  cost: { input: number; output: number; cacheRead: number; cacheWrite: number; total: number; totalFromProvider?: boolean };
}

/** How hard a model was asked to think. */
export type ThinkingLevel = "off" | "minimal" | "low" | "medium" | "high" | "xhigh" | "max";

/** Why an answer ended. */
export type StopReason = "pending" | "stop" | "length" | "toolUse" | "error" | "aborted" | "deferred";

/** A provider API's name (`"anthropic-messages"`, `"openai-responses"`, …). */
export type Api = string;

/**
 * Instructions from this point of a transcript on (pi-ai's also carry the tools added and removed there,
 * which the library writes but does not read).
 */
export interface SystemMessage {
  role: "system";
  content: string | TextContent[];
  sections?: Record<string, string | null>;
  timestamp: number;
}

export interface UserMessage {
  role: "user";
  content: string | (TextContent | ImageContent)[];
  timestamp: number;
}

/** A model's answer: its content, who gave it, what it cost and why it ended. */
export interface AssistantMessage {
  role: "assistant";
  content: (TextContent | ThinkingContent | ToolCall)[];
  api: Api;
  provider: string;
  model: string;
  responseModel?: string;
  responseId?: string;
  providerThinkingLevel?: string;
  thinkingLevel?: ThinkingLevel;
  usage: Usage;
  stopReason: StopReason;
  errorMessage?: string;
  rawStopReason?: string;
  endTurn?: boolean;
  timestamp: number;
  durationMs?: number;
}

/** A tool's answer to a call (`details` is for the app, not the model). */
export interface ToolResultMessage {
  role: "toolResult";
  toolCallId: string;
  toolName: string;
  content: (TextContent | ImageContent)[];
  details?: ModelJson;
  usage?: Usage;
  isError: boolean;
  timestamp: number;
  durationMs?: number;
}

export type Message = SystemMessage | UserMessage | AssistantMessage | ToolResultMessage;

/** A model of the catalogue: what the library reads of pi-ai's `Model` (which has more). */
export interface Model {
  id: string;
  name: string;
  api: Api;
  provider: string;
}

/** One event of a streamed answer: most carry the answer so far (`partial`). */
export interface AnswerEvent {
  type: string;
  partial?: AssistantMessage;
}

/** A streamed answer: its events, then the whole answer. */
export interface AnswerStream extends AsyncIterable<AnswerEvent> {
  result(): Promise<AssistantMessage>;
}

/** What a request to a model sends: the transcript (and a system prompt, for a summary). */
export interface ModelRequest {
  systemPrompt?: string;
  messages: Message[];
}

/**
 * The model catalogue a harness asks (`HarnessOptions.models`): pi-ai's `createModels()` is one. The agent
 * finds a conversation's model by provider and id and streams its answers; compaction asks for a summary.
 */
export interface ModelCatalog {
  getModel(provider: string, id: string): Model | undefined;
  /** Every model it has (pi-ai's has it): named in the message when a conversation's model is not found. */
  getModels?(): readonly Model[];
  streamSimple(model: Model, request: ModelRequest, options?: { signal?: AbortSignal }): AnswerStream;
  completeSimple(model: Model, request: ModelRequest, options?: { signal?: AbortSignal }): Promise<AssistantMessage>;
}
