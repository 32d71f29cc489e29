import type { Model, ModelCatalog } from "./model-types.ts";
import type { ModelRef } from "./types.ts";

/** The model `ref` names in the harness's `models`, or the message that says why there is none. */
export function findModel(models: ModelCatalog | undefined, ref: ModelRef): { models: ModelCatalog; model: Model; ref: ModelRef } | string {
  const model = models?.getModel(ref.provider, ref.id);
  if (!models || !model) return `Model ${ref.provider}/${ref.id} is not available in HarnessOptions.models.`;
  return { models, model, ref };
}
