import { type Context, throwIfCancelled } from "../base/context.ts";
import { FileNotFound, InvalidPath } from "../errors.ts";
import { normalizePath } from "./paths.ts";
import type { ExecutionEnv } from "./types.ts";

/**
 * An `ExecutionEnv` whose files live in a Map. It stands for "the world" in tests: keep one instance across a
 * simulated crash (it is not part of the storage image), and a tool's side effects survive the crash exactly
 * as real files would.
 */
export class MemoryEnv implements ExecutionEnv {
  readonly #files = new Map<string, string>();

  constructor(files: Record<string, string> = {}) {
    for (const [path, text] of Object.entries(files)) this.#files.set(file(path), text);
  }

  async read(path: string, context: Context): Promise<string> {
    throwIfCancelled(context);
    const key = file(path);
    const text = this.#files.get(key);
    if (text === undefined) throw new FileNotFound(key);
    return text;
  }

  async write(path: string, text: string, context: Context): Promise<void> {
    throwIfCancelled(context);
    this.#files.set(file(path), String(text));
  }

  async append(path: string, text: string, context: Context): Promise<void> {
    throwIfCancelled(context);
    const key = file(path);
    this.#files.set(key, (this.#files.get(key) ?? "") + String(text));
  }

  async list(directory: string | undefined, context: Context): Promise<string[]> {
    throwIfCancelled(context);
    const prefix = directory === undefined ? "" : normalizePath(directory);
    return [...this.#files.keys()].filter((key) => prefix === "" || key.startsWith(`${prefix}/`)).sort();
  }

  async remove(path: string, context: Context): Promise<void> {
    throwIfCancelled(context);
    const key = file(path);
    if (!this.#files.delete(key)) throw new FileNotFound(key);
  }

  /** Every file and its text, for tests and inspectors. */
  snapshot(): Record<string, string> {
    return Object.fromEntries([...this.#files.entries()].sort(([a], [b]) => (a < b ? -1 : 1)));
  }
}

/**
 * `HarnessOptions.env` backed by one `MemoryEnv` per conversation, created on first use. Pass the same
 * factory to the harness that reopens after a crash, and the files are still there.
 */
export function memoryEnvs(): ((conversationId: number) => MemoryEnv) & { get(conversationId: number): MemoryEnv } {
  const envs = new Map<number, MemoryEnv>();
  const get = (conversationId: number): MemoryEnv => {
    let env = envs.get(conversationId);
    if (!env) envs.set(conversationId, (env = new MemoryEnv()));
    return env;
  };
  return Object.assign((conversationId: number) => get(conversationId), { get });
}

function file(path: string): string {
  const key = normalizePath(path);
  if (key === "") throw new InvalidPath("A file path must name a file, not the root.");
  return key;
}
