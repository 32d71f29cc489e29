import { BACKGROUND_CONTEXT as ctx, type ExecutionEnv, type Harness, type Json, NotFound } from "../src/index.ts";
import type { DemoModels } from "./models.ts";
import type { DemoMethods } from "./protocol.ts";

/**
 * The app methods of DemoMethods (`client.call(name, ...args)`), served alike by the tab's worker
 * (harness-worker.ts, files on OPFS) and the Durable Object (edge-object.ts, files in memory). Arguments are
 * checked: they come from the page.
 */
export function demoMethods(
  models: DemoModels,
  envs: (conversationId: number) => ExecutionEnv,
): Record<keyof DemoMethods, (harness: Harness, ...args: Json[]) => unknown> {
  const files = (harness: Harness, conversationId: Json) => {
    if (typeof conversationId !== "number" || !harness.conversationIds().includes(conversationId)) {
      throw new NotFound(`There is no conversation ${JSON.stringify(conversationId)}.`);
    }
    return envs(conversationId);
  };
  return {
    "models.list": () => models.list(),
    "models.configure": (_harness, provider) => models.configure(provider),
    "files.list": (harness, conversationId) => files(harness, conversationId).list(undefined, ctx),
    "files.read": (harness, conversationId, path) => files(harness, conversationId).read(String(path), ctx),
  };
}
