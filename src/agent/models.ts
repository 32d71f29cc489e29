import type { Model, ModelCatalog } from "./model-types.ts";
import type { ModelRef } from "./types.ts";

/** How many of the models it has a "not found" message names. */
const NAMED_MODELS = 10;

/** The model `ref` names in the harness's `models`, or the message that says why there is none and what to do. */
export function findModel(models: ModelCatalog | undefined, ref: ModelRef): { models: ModelCatalog; model: Model; ref: ModelRef } | string {
  const name = `${ref.provider}/${ref.id}`;
  if (!models) {
    return `Model ${name} cannot be used: the harness has no models. Pass HarnessOptions.models (pi-ai's createModels() with a provider set) to Harness.open or serveHarness.`;
  }
  const model = models.getModel(ref.provider, ref.id);
  if (!model) {
    const known = models.getModels?.().map((candidate) => `${candidate.provider}/${candidate.id}`);
    const has =
      known === undefined
        ? ""
        : known.length === 0
          ? " (it has none: set a provider with models.setProvider(…))"
          : ` (it has ${known.slice(0, NAMED_MODELS).join(", ")}${known.length > NAMED_MODELS ? `, … (${known.length})` : ""})`;
    return `Model ${name} is not in HarnessOptions.models${has}. Configure the conversation with one it has, or set the provider that has ${name}.`;
  }
  return { models, model, ref };
}
