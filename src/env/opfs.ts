/**
 * An `ExecutionEnv` on the Origin Private File System: each conversation gets a directory of real files that
 * outlive a reload (the world a crash does not rewind). Browser adapter: it uses `navigator.storage`.
 *
 *   serveHarness({ env: opfsEnvs(), extensions: [defineExtension({ name: "files", tools: fileTools })] });
 */
import { type Context, throwIfCancelled } from "../base/context.ts";
import { FileNotFound, InvalidPath, StorageQuotaExceeded, StorageUnavailable } from "../errors.ts";
import { normalizePath } from "./paths.ts";
import type { ExecutionEnv } from "./types.ts";

export class OpfsEnv implements ExecutionEnv {
  readonly #root: Promise<FileSystemDirectoryHandle>;

  /** `directory` is a path under the origin's OPFS root, created on first use. */
  constructor(directory: string) {
    this.#root = (async () => {
      const storage = (globalThis.navigator as Navigator | undefined)?.storage;
      if (!storage?.getDirectory)
        throw new StorageUnavailable("The Origin Private File System is not available here (it needs a secure context in a browser).");
      let handle = await storage.getDirectory();
      for (const segment of normalizePath(directory).split("/").filter(Boolean))
        handle = await handle.getDirectoryHandle(segment, { create: true });
      return handle;
    })();
  }

  async read(path: string, context: Context): Promise<string> {
    throwIfCancelled(context);
    const handle = await this.#file(path, false);
    return (await handle.getFile()).text();
  }

  async write(path: string, text: string, context: Context): Promise<void> {
    throwIfCancelled(context);
    await this.#put(path, String(text), false);
  }

  async append(path: string, text: string, context: Context): Promise<void> {
    throwIfCancelled(context);
    await this.#put(path, String(text), true);
  }

  async list(directory: string | undefined, context: Context): Promise<string[]> {
    throwIfCancelled(context);
    const prefix = directory === undefined ? "" : normalizePath(directory);
    let handle = await this.#root;
    try {
      for (const segment of prefix.split("/").filter(Boolean)) handle = await handle.getDirectoryHandle(segment);
    } catch (error) {
      if (isNotFound(error)) return [];
      throw error;
    }
    const out: string[] = [];
    const walk = async (dir: FileSystemDirectoryHandle, base: string) => {
      for await (const [name, entry] of dir as unknown as AsyncIterable<[string, FileSystemHandle]>) {
        const path = base ? `${base}/${name}` : name;
        if (entry.kind === "file") out.push(path);
        else await walk(entry as FileSystemDirectoryHandle, path);
      }
    };
    await walk(handle, prefix);
    return out.sort();
  }

  async remove(path: string, context: Context): Promise<void> {
    throwIfCancelled(context);
    const { directory, name, key } = await this.#locate(path, false);
    try {
      await directory.removeEntry(name);
    } catch (error) {
      if (isNotFound(error)) throw new FileNotFound(key);
      throw error;
    }
  }

  async #put(path: string, text: string, append: boolean): Promise<void> {
    const handle = await this.#file(path, true);
    try {
      // A writable stream writes to a swap file and replaces the original on close: a crash mid-write
      // leaves the old content, never half of the new.
      const writable = await handle.createWritable({ keepExistingData: append });
      if (append) await writable.seek((await handle.getFile()).size);
      await writable.write(text);
      await writable.close();
    } catch (error) {
      if ((error as { name?: string })?.name === "QuotaExceededError") {
        throw new StorageQuotaExceeded(`The storage quota is exhausted; ${path} was not changed.`, { cause: error });
      }
      throw error;
    }
  }

  async #file(path: string, create: boolean): Promise<FileSystemFileHandle> {
    const { directory, name, key } = await this.#locate(path, create);
    try {
      return await directory.getFileHandle(name, { create });
    } catch (error) {
      if (isNotFound(error)) throw new FileNotFound(key);
      if ((error as { name?: string })?.name === "TypeMismatchError") throw new InvalidPath(`${key} is a directory, not a file.`);
      throw error;
    }
  }

  async #locate(path: string, create: boolean): Promise<{ directory: FileSystemDirectoryHandle; name: string; key: string }> {
    const key = normalizePath(path);
    if (key === "") throw new InvalidPath("A file path must name a file, not the root.");
    const segments = key.split("/");
    const name = segments.pop()!;
    let directory = await this.#root;
    try {
      for (const segment of segments) directory = await directory.getDirectoryHandle(segment, { create });
    } catch (error) {
      if (isNotFound(error)) throw new FileNotFound(key);
      throw error;
    }
    return { directory, name, key };
  }
}

/** `HarnessOptions.env` with one OPFS directory per conversation: `<root>/conversation-<id>/`. */
export function opfsEnvs(root = "pi-durable-files"): (conversationId: number) => OpfsEnv {
  const envs = new Map<number, OpfsEnv>();
  return (conversationId) => {
    let env = envs.get(conversationId);
    if (!env) envs.set(conversationId, (env = new OpfsEnv(`${root}/conversation-${conversationId}`)));
    return env;
  };
}

function isNotFound(error: unknown): boolean {
  return (error as { name?: string })?.name === "NotFoundError";
}
