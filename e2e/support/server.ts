import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { extname, join, normalize, resolve } from "node:path";

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".webmanifest": "application/manifest+json",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".wasm": "application/wasm", // required by WebAssembly.instantiateStreaming
  ".json": "application/json",
  ".map": "application/json",
};

/**
 * Serves built directories on 127.0.0.1 (a secure context, so OPFS works) on a free port. `mounts` maps a URL
 * prefix ("/", "/e2e/") to a directory; the longest matching prefix wins. Apps mounted on one server share an
 * origin, hence OPFS: a test page can reach the demo app's database files. No COOP/COEP: opfs-sahpool does
 * not need SharedArrayBuffer, and testing without the headers proves that. `onRequest` hears each request's
 * path (to see what a service worker fetched).
 */
export async function serveStatic(
  mounts: string | Record<string, string>,
  onRequest?: (pathname: string) => void,
): Promise<{ url: string; close(): Promise<void> }> {
  const table = Object.entries(typeof mounts === "string" ? { "/": mounts } : mounts)
    .map(([prefix, root]) => ({ prefix, base: resolve(root) }))
    .sort((a, b) => b.prefix.length - a.prefix.length);
  const server = createServer(async (request, response) => {
    const pathname = decodeURIComponent(new URL(request.url ?? "/", "http://localhost").pathname);
    onRequest?.(pathname);
    const mount = table.find(({ prefix }) => pathname.startsWith(prefix));
    if (!mount) return void response.writeHead(404).end();
    const relative = pathname.slice(mount.prefix.length - 1);
    const file = normalize(join(mount.base, relative.endsWith("/") ? `${relative}index.html` : relative));
    if (!file.startsWith(mount.base)) return void response.writeHead(403).end();
    try {
      if (!(await stat(file)).isFile()) throw new Error("not a file");
    } catch {
      return void response.writeHead(404).end();
    }
    response.writeHead(200, { "Content-Type": TYPES[extname(file)] ?? "application/octet-stream", "Cache-Control": "no-store" });
    createReadStream(file).pipe(response);
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () => new Promise<void>((done) => server.close(() => done())),
  };
}
