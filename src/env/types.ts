import type { Context } from "../base/context.ts";

/**
 * Where a conversation's tools touch the world: files under one root. Paths are relative to the root and use
 * `/`; `..` may not leave the root. Built per conversation through `HarnessOptions.env`.
 *
 * The world is not rewound by a crash: what a tool wrote here stays written, which is why tool replay
 * policies exist (S8).
 */
/** Builds (or finds) the execution environment of a conversation: `HarnessOptions.env`. */
export type EnvFactory = (conversationId: number, context: Context) => ExecutionEnv | Promise<ExecutionEnv>;

export interface ExecutionEnv {
  /** The file's text; rejects with `FileNotFound` when there is none. */
  read(path: string, context: Context): Promise<string>;
  /** Creates or replaces the file. */
  write(path: string, text: string, context: Context): Promise<void>;
  /** Appends to the file, creating it when missing. */
  append(path: string, text: string, context: Context): Promise<void>;
  /** Files under `directory` (default: the root), as root-relative paths in sorted order. */
  list(directory: string | undefined, context: Context): Promise<string[]>;
  /** Removes the file; rejects with `FileNotFound` when there is none. */
  remove(path: string, context: Context): Promise<void>;
}
