import {
  type Api,
  type ApiKeyAuth,
  createModels,
  createProvider,
  type Model,
  type MutableModels,
  type Provider,
} from "@earendil-works/pi-ai";
import { openAICompletionsApi } from "@earendil-works/pi-ai/api/openai-completions.lazy";
import { offlineProvider } from "./offline-model.ts";
import { type ModelChoice, OFFLINE_MODEL, OFFLINE_MODEL_LABEL, type ProviderConfig } from "./protocol.ts";

/** The demo's models: the offline demo model always, real providers once the page configures them. */
export interface DemoModels {
  /** The pi-ai collection the harness requests from (`serveHarness({ models })`). */
  readonly models: MutableModels;
  list(): ModelChoice[];
  /** Adds or replaces a provider. The key lives only in this closure: never in the database. */
  configure(config: unknown): Promise<ModelChoice[]>;
}

export function createDemoModels(options: { tokensPerSecond?: number } = {}): DemoModels {
  const models = createModels();
  models.setProvider(offlineProvider(options));
  /** Configured real providers: provider id → the models it offers here, with their labels. */
  const configured = new Map<string, ModelChoice[]>();
  const list = (): ModelChoice[] => [{ ...OFFLINE_MODEL, label: OFFLINE_MODEL_LABEL, offline: true }, ...[...configured.values()].flat()];
  return {
    models,
    list,
    async configure(config) {
      const provider = await providerFor(checkConfig(config));
      models.setProvider(provider.provider);
      configured.set(provider.provider.id, [{ provider: provider.provider.id, id: provider.model, label: provider.label, offline: false }]);
      return list();
    },
  };
}

/** Auth that hands pi-ai the key from memory; without one (a local endpoint) a placeholder, which openai-completions needs. */
function keyAuth(name: string, apiKey: string | undefined): { apiKey: ApiKeyAuth } {
  return { apiKey: { name, resolve: async () => ({ auth: { apiKey: apiKey || "none" }, source: "this tab's memory" }) } };
}

async function providerFor(config: ProviderConfig): Promise<{ provider: Provider; model: string; label: string }> {
  if (config.kind === "openai-compatible") {
    const baseUrl = config.baseUrl.replace(/\/+$/, "");
    const model: Model<"openai-completions"> = {
      id: config.model,
      name: config.model,
      api: "openai-completions",
      provider: "openai-compatible",
      baseUrl,
      reasoning: false,
      input: ["text"],
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
      contextWindow: 32_768,
      maxTokens: 4096,
      // Local servers (llama.cpp, vLLM, Ollama) reject the developer role and reasoning_effort.
      compat: { supportsDeveloperRole: false, supportsReasoningEffort: false },
    };
    const provider = createProvider({
      id: "openai-compatible",
      name: "OpenAI-compatible endpoint",
      baseUrl,
      auth: keyAuth("API key", config.apiKey),
      models: [model],
      api: openAICompletionsApi(),
    });
    return { provider, model: config.model, label: `${config.model} at ${baseUrl}` };
  }
  // The built-in providers (and their model catalogs) load only when the page asks for them.
  const base =
    config.kind === "openai"
      ? (await import("@earendil-works/pi-ai/providers/openai")).openaiProvider()
      : (await import("@earendil-works/pi-ai/providers/anthropic")).anthropicProvider();
  const listed = base.getModels() as readonly Model<Api>[];
  const template = listed.find((model) => model.id === config.model) ?? listed[0];
  if (!template) throw new Error(`pi-ai lists no models for ${base.name}.`);
  const model: Model<Api> = template.id === config.model ? template : { ...template, id: config.model, name: config.model };
  const provider: Provider = {
    ...(base as Provider),
    // The key from this tab's memory replaces the provider's own auth (environment variables, OAuth login).
    auth: keyAuth(`${base.name} API key`, config.apiKey),
    getModels: () => [model],
    getAllModels: () => [model],
  };
  return { provider, model: config.model, label: `${base.name} ${config.model}` };
}

/** The page's config, checked: it crosses the worker boundary as plain data. */
function checkConfig(config: unknown): ProviderConfig {
  const value = (config ?? {}) as Record<string, unknown>;
  const text = (field: string, optional = false): string | undefined => {
    const found = value[field];
    if (found === undefined && optional) return undefined;
    if (typeof found !== "string" || found.trim() === "") throw new TypeError(`models.configure: ${field} must be a non-empty string.`);
    return found.trim();
  };
  switch (value.kind) {
    case "openai-compatible": {
      const baseUrl = text("baseUrl")!;
      if (!/^https?:\/\//.test(baseUrl))
        throw new TypeError(
          `models.configure: baseUrl must be an http(s) URL such as http://127.0.0.1:11434/v1; got ${JSON.stringify(baseUrl)}.`,
        );
      const apiKey = text("apiKey", true);
      return { kind: "openai-compatible", baseUrl, model: text("model")!, ...(apiKey ? { apiKey } : {}) };
    }
    case "openai":
    case "anthropic":
      return { kind: value.kind, apiKey: text("apiKey")!, model: text("model")! };
    default:
      throw new TypeError(
        `models.configure: kind must be "openai-compatible", "openai" or "anthropic"; got ${JSON.stringify(value.kind)}.`,
      );
  }
}
