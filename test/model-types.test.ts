import type * as Pi from "@earendil-works/pi-ai";
import { createModels } from "@earendil-works/pi-ai";
import { describe, expect, it } from "vitest";
import type * as Ours from "../src/agent/model-types.ts";
import type { HarnessOptions } from "../src/index.ts";

// The library declares pi-ai's shapes itself (src/agent/model-types.ts) so that its .d.ts carry no Node globals
// (scripts/test-wrangler.mjs compiles a Worker against them with skipLibCheck off). Checked here, by the
// compiler (npm run typecheck), against the pi-ai installed: pi-ai's values are accepted where ours are asked
// for, and ours are pi-ai's (a message read from a view goes back to pi-ai unchanged).

type Assignable<From, To> = [From] extends [To] ? true : false;
type Both<A, B> = Assignable<A, B> extends true ? Assignable<B, A> : false;

const sameShapes = {
  TextContent: true,
  ThinkingContent: true,
  ImageContent: true,
  ToolCall: true,
  Usage: true,
  StopReason: true,
  UserMessage: true,
  AssistantMessage: true,
  ToolResultMessage: true,
} satisfies {
  TextContent: Both<Pi.TextContent, Ours.TextContent>;
  ThinkingContent: Both<Pi.ThinkingContent, Ours.ThinkingContent>;
  ImageContent: Both<Pi.ImageContent, Ours.ImageContent>;
  ToolCall: Both<Pi.ToolCall, Ours.ToolCall>;
  Usage: Both<Pi.Usage, Ours.Usage>;
  StopReason: Both<Pi.StopReason, Ours.StopReason>;
  UserMessage: Both<Pi.UserMessage, Ours.UserMessage>;
  AssistantMessage: Both<Pi.AssistantMessage, Ours.AssistantMessage>;
  ToolResultMessage: Both<Pi.ToolResultMessage, Ours.ToolResultMessage>;
};

const piAccepted = {
  SystemMessage: true,
  Message: true,
  Model: true,
  Models: true,
} satisfies {
  SystemMessage: Assignable<Pi.SystemMessage, Ours.SystemMessage>;
  Message: Assignable<Pi.Message, Ours.Message>;
  Model: Assignable<Pi.Model<Pi.Api>, Ours.Model>;
  Models: Assignable<Pi.Models, Ours.ModelCatalog>;
};

describe("the library's declarations of pi-ai's shapes (model-types.ts)", () => {
  it("pi-ai's values pass where the library asks for its own shapes, and its messages are pi-ai's", () => {
    // A catalogue from createModels() is HarnessOptions.models as it is, with no cast.
    const options: Pick<HarnessOptions, "models"> = { models: createModels() };
    expect(typeof options.models?.getModel).toBe("function");
    expect(Object.values({ ...sameShapes, ...piAccepted }).every(Boolean)).toBe(true);
  });
});
