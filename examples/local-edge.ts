/**
 * A local Cloudflare edge for examples, tests and benchmarks: a Worker module bundled as a Worker build does
 * (esbuild with workerd's conditions) and run in workerd through miniflare (docs/decisions/0014).
 */
import { build } from "esbuild";

/** Bundles the Worker whose entry is `entry` (a file URL or path) into one ES module. */
export async function bundleWorker(entry: URL | string): Promise<string> {
  const result = await build({
    entryPoints: [entry instanceof URL ? entry.pathname : entry],
    bundle: true,
    format: "esm",
    platform: "browser",
    conditions: ["workerd", "worker", "browser"],
    external: ["cloudflare:*"],
    write: false,
    logLevel: "warning",
  });
  return result.outputFiles[0]!.text;
}

/**
 * Miniflare's module list for the bundle. Listed rather than scanned: pi-ai loads its providers through
 * dynamic imports that miniflare's scanner cannot resolve.
 */
export function workerModules(script: string) {
  return [{ type: "ESModule" as const, path: "worker.js", contents: script }];
}

/** Sets for a local object that runs the harness: a SQLite-backed Durable Object class. */
export function sqliteObject(className: string) {
  return { className, useSQLite: true };
}

/**
 * workerd's output, without its notice that an alarm was moved while its handler was already scheduled (the
 * harness moves the one alarm whenever the earliest wake-up changes; workerd logs each such move).
 */
export function quietRuntime(stdout: NodeJS.ReadableStream, stderr: NodeJS.ReadableStream): void {
  for (const [stream, sink] of [
    [stdout, process.stdout],
    [stderr, process.stderr],
  ] as const) {
    let buffered = "";
    stream.on("data", (chunk: Buffer) => {
      const lines = (buffered + chunk.toString()).split("\n");
      buffered = lines.pop()!;
      for (const line of lines) if (!line.includes("alarm handler canceled with requestScheduledAlarm")) sink.write(`${line}\n`);
    });
  }
}
