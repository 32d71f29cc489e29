import type { HarnessClient } from "pi-durable-web/client";
import type { ModelChoice, ProviderConfig } from "../../worker/protocol.ts";
import { OFFLINE_MODEL } from "../../worker/protocol.ts";
import { app } from "./app.ts";
import { conversation, isOfflineModel, modelKey, onConversation } from "./conversation.ts";
import { byId, errorText, h } from "./dom.ts";

/**
 * Models: the offline demo model by default; real providers (an OpenAI-compatible endpoint, OpenAI,
 * Anthropic) added with a key. Keys live in this page's memory and in the worker's, which are both gone
 * after a reload — unless the user ticks "remember on this device": then they are kept in localStorage and
 * sent to each new worker. The conversation's stored config names only provider and model id, so no key
 * ever reaches the SQLite database.
 */
const REMEMBERED = "pi-durable-web:providers";
const OFFLINE_LABEL = "offline demo model";

type Provider = ProviderConfig & { remember: boolean };

const select = byId<HTMLSelectElement>("model-select");
const note = byId("model-note");
const modelName = byId("model-name");
const providerList = byId<HTMLUListElement>("providers");
const formError = byId("provider-error");

function remembered(): ProviderConfig[] {
  try {
    return JSON.parse(localStorage.getItem(REMEMBERED) ?? "[]") as ProviderConfig[];
  } catch {
    return [];
  }
}

const providers = new Map<string, Provider>(remembered().map((config) => [providerKey(config), { ...config, remember: true }]));
let choices: ModelChoice[] = [];
/** The current worker has been told every provider this page knows (until then nothing is "missing"). */
let synced = false;

function providerKey(config: ProviderConfig): string {
  return `${config.kind}:${config.kind === "openai-compatible" ? config.baseUrl : ""}:${config.model}`;
}

function saveRemembered(): void {
  const kept = [...providers.values()]
    .filter((provider) => provider.remember)
    .map(({ remember: _remember, ...config }) => config as ProviderConfig);
  if (kept.length > 0) localStorage.setItem(REMEMBERED, JSON.stringify(kept));
  else localStorage.removeItem(REMEMBERED);
}

function label(choice: ModelChoice): string {
  return choice.offline ? OFFLINE_LABEL : choice.label;
}

function labelFor(model: { provider: string; id: string } | undefined): string {
  if (!model) return "none";
  if (isOfflineModel(model)) return OFFLINE_LABEL;
  const choice = choices.find((candidate) => candidate.provider === model.provider && candidate.id === model.id);
  return choice ? label(choice) : `${model.provider}/${model.id}`;
}

function renderChoices(): void {
  const current = conversation()?.view?.agent.model;
  const known = choices.length > 0 ? choices : [{ ...OFFLINE_MODEL, label: OFFLINE_LABEL, offline: true }];
  const options = known.map((choice) => h("option", { value: modelKey(choice) }, label(choice)));
  if (current && !known.some((choice) => modelKey(choice) === modelKey(current))) {
    options.push(h("option", { value: modelKey(current) }, `${modelKey(current)} (needs its key again)`));
  }
  select.replaceChildren(...options);
  select.value = modelKey(current ?? OFFLINE_MODEL);
  modelName.textContent = labelFor(current ?? OFFLINE_MODEL);
  const missing = synced && current && !isOfflineModel(current) && !choices.some((choice) => modelKey(choice) === modelKey(current));
  note.textContent = missing
    ? `The conversation uses ${modelKey(current)}, whose key is not in this worker's memory. Add the provider again below, or switch back to the offline demo model.`
    : isOfflineModel(current ?? OFFLINE_MODEL)
      ? "The offline demo model runs a small scripted agent inside the worker: no network, no key."
      : "Requests go from the worker straight to the provider.";
  note.classList.toggle("is-warn", Boolean(missing));
  document.body.dataset.modelMissing = String(Boolean(missing));
}

function renderProviders(): void {
  providerList.replaceChildren(
    ...[...providers.entries()].map(([key, provider]) =>
      h(
        "li",
        null,
        h("span", null, `${provider.kind}: ${provider.model}${provider.kind === "openai-compatible" ? ` at ${provider.baseUrl}` : ""}`),
        h("span", { class: "muted" }, provider.remember ? " · remembered on this device" : " · in memory only"),
        h(
          "button",
          {
            type: "button",
            class: "ghost",
            onclick: () => {
              providers.delete(key);
              saveRemembered();
              renderProviders();
            },
          },
          "Forget",
        ),
      ),
    ),
  );
  if (providers.size === 0) providerList.append(h("li", { class: "muted" }, "None: only the offline demo model."));
}

/** Sends every provider this page knows to a new worker (their keys are not in the database, by design). */
async function sync(client: HarnessClient): Promise<void> {
  try {
    for (const { remember: _remember, ...config } of providers.values()) {
      choices = await client.call<ModelChoice[]>("models.configure", config as ProviderConfig);
    }
    if (providers.size === 0) choices = await client.call<ModelChoice[]>("models.list");
  } catch (error) {
    if (app.isCurrent(client)) app.showError(error, "models");
  }
  if (!app.isCurrent(client)) return;
  synced = true;
  renderChoices();
}

app.beforeResume({ needed: () => providers.size > 0, run: sync });
app.onClient(() => {
  synced = false;
  choices = [];
});
onConversation(() => renderChoices());

select.addEventListener(
  "change",
  app.attempt(async () => {
    const current = conversation();
    if (!current) throw new Error("The database is not open yet.");
    const [provider, ...id] = select.value.split("/");
    await current.client.configure(current.id, { model: { provider: provider!, id: id.join("/") } });
  }, "choose model"),
);

const kind = byId<HTMLSelectElement>("provider-kind");
const PLACEHOLDERS: Record<string, string> = { "openai-compatible": "llama3.2", openai: "gpt-4o-mini", anthropic: "claude-sonnet-4-5" };
function renderKind(): void {
  byId("provider-base-url-label").hidden = kind.value !== "openai-compatible";
  byId<HTMLInputElement>("provider-model").placeholder = PLACEHOLDERS[kind.value] ?? "";
  byId<HTMLInputElement>("provider-key").placeholder = kind.value === "openai-compatible" ? "optional for a local server" : "required";
}
kind.addEventListener("change", renderKind);
renderKind();

byId<HTMLFormElement>("provider-form").addEventListener("submit", (event) => {
  event.preventDefault();
  formError.hidden = true;
  void (async () => {
    const model = byId<HTMLInputElement>("provider-model").value.trim();
    const apiKey = byId<HTMLInputElement>("provider-key").value.trim();
    const baseUrl = byId<HTMLInputElement>("provider-base-url").value.trim();
    const remember = byId<HTMLInputElement>("provider-remember").checked;
    if (!model) throw new Error("Name the model (for example llama3.2).");
    let config: ProviderConfig;
    if (kind.value === "openai-compatible") {
      if (!baseUrl) throw new Error("An OpenAI-compatible endpoint needs its base URL.");
      config = { kind: "openai-compatible", baseUrl, model, ...(apiKey ? { apiKey } : {}) };
    } else {
      if (!apiKey) throw new Error(`${kind.value === "openai" ? "OpenAI" : "Anthropic"} needs an API key.`);
      config = { kind: kind.value as "openai" | "anthropic", apiKey, model };
    }
    const current = conversation();
    if (!current) throw new Error("The database is not open yet.");
    const before = new Set(choices.map(modelKey));
    choices = await current.client.call<ModelChoice[]>("models.configure", config);
    providers.set(providerKey(config), { ...config, remember });
    saveRemembered();
    renderProviders();
    // Use the model just added: the new choice, or the one that matches the model id.
    const added =
      choices.find((choice) => !before.has(modelKey(choice))) ?? choices.find((choice) => !choice.offline && choice.id === model);
    if (added) await current.client.configure(current.id, { model: { provider: added.provider, id: added.id } });
    byId<HTMLInputElement>("provider-key").value = "";
    renderChoices();
  })().catch((error) => {
    formError.hidden = false;
    formError.textContent = `${errorText(error).name}: ${errorText(error).message}`;
  });
});

renderProviders();
renderChoices();
