import { InvalidDefinition } from "../errors.ts";
import type { AnyTaskDefinition, Extension, InstalledExtensions } from "./types.ts";

export type { Extension } from "./types.ts";

export function defineExtension<E extends Extension>(extension: E): E {
  return Object.freeze({ ...extension });
}

/**
 * Installed extensions. Installing (or replacing) an extension publishes to subscribers, so a harness retries
 * tasks that were blocked on a missing definition.
 */
export class Registry implements InstalledExtensions {
  readonly #extensions = new Map<string, Extension>();
  readonly #builtins: readonly Extension[];
  readonly #listeners = new Set<() => void>();
  #tasks = new Map<string, AnyTaskDefinition>();

  /** `builtins` come first and cannot be uninstalled (the agent passes its own: see `createRegistry`). */
  constructor(builtins: readonly Extension[] = []) {
    this.#builtins = builtins;
    this.#rebuild([...builtins]);
  }

  /** Installs an extension; a second install under the same name replaces the first. */
  install(extension: Extension): this {
    if (typeof extension?.name !== "string" || extension.name === "") throw new InvalidDefinition("An extension needs a name.");
    const next = new Map(this.#extensions);
    next.set(extension.name, extension);
    this.#rebuild([...this.#builtins, ...next.values()]);
    this.#extensions.clear();
    for (const [name, ext] of next) this.#extensions.set(name, ext);
    for (const listener of this.#listeners) listener();
    return this;
  }

  uninstall(name: string): this {
    if (this.#extensions.delete(name)) {
      this.#rebuild([...this.#builtins, ...this.#extensions.values()]);
      for (const listener of this.#listeners) listener();
    }
    return this;
  }

  /** The definition installed for a task kind. */
  task(kind: string): AnyTaskDefinition | undefined {
    return this.#tasks.get(kind);
  }

  /** Built-ins first, then extensions in installation order. */
  get extensions(): readonly Extension[] {
    return [...this.#builtins, ...this.#extensions.values()];
  }

  subscribe(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #rebuild(extensions: Extension[]): void {
    const tasks = new Map<string, AnyTaskDefinition>();
    for (const extension of extensions) {
      for (const definition of extension.tasks ?? []) {
        if (!Number.isInteger(definition.version) || definition.version < 1) {
          throw new InvalidDefinition(`Task ${definition.name} needs a positive integer version.`);
        }
        if (tasks.has(definition.name)) {
          throw new InvalidDefinition(`Task kind ${definition.name} is defined twice (again in extension ${extension.name}).`);
        }
        tasks.set(definition.name, definition);
      }
    }
    this.#tasks = tasks;
  }
}
