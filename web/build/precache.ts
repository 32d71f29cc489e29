import { createHash } from "node:crypto";
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join, relative, resolve } from "node:path";
import { deflateSync } from "node:zlib";
import type { Plugin } from "vite";

/**
 * Makes the production build an installable, offline-capable PWA:
 * - emits the PNG app icons the manifest names (drawn here, so the repository holds no binary files);
 * - after everything is written (the page, the worker bundles, sqlite's .wasm), lists the output files and
 *   writes that list and a content hash into `sw.js` (from web/public), so the service worker precaches
 *   exactly this build and a new build gets a new cache.
 */
export function precache(): Plugin {
  let outDir = "";
  return {
    name: "pi-durable-web:precache",
    apply: "build",
    configResolved(config) {
      outDir = resolve(config.root, config.build.outDir);
    },
    generateBundle() {
      for (const size of [192, 512]) this.emitFile({ type: "asset", fileName: `icon-${size}.png`, source: drawIcon(size) });
    },
    async closeBundle() {
      const files = (await listFiles(outDir)).filter((file) => file !== "sw.js" && !file.endsWith(".map")).sort();
      const hash = createHash("sha256");
      for (const file of files) hash.update(file).update(await readFile(join(outDir, file)));
      const version = hash.digest("hex").slice(0, 16);
      const swPath = join(outDir, "sw.js");
      const source = await readFile(swPath, "utf8");
      const precached = ["./", ...files.map((file) => `./${file}`)];
      const patched = source
        .replace("/* precache */ []", JSON.stringify(precached))
        .replace('/* version */ "dev"', JSON.stringify(version));
      if (patched === source) throw new Error("sw.js has no precache placeholders: check web/public/sw.js.");
      await writeFile(swPath, patched);
    },
  };
}

async function listFiles(root: string, directory = root): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await readdir(directory, { withFileTypes: true })) {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) found.push(...(await listFiles(root, path)));
    else found.push(relative(root, path).split("\\").join("/"));
  }
  return found;
}

// ---- the icon: web/public/icon.svg drawn full-bleed (fit for a maskable icon), 3×3 supersampled -------------
type Rgb = [number, number, number];
const DARK: Rgb = [0x31, 0x2e, 0x81];
const LIGHT: Rgb = [0x4f, 0x46, 0xe5];
const WHITE: Rgb = [255, 255, 255];
const DOT: Rgb = [0xa5, 0xb4, 0xfc];

/** The colour at (x, y) in the SVG's 64×64 space. */
function shade(x: number, y: number): Rgb {
  const dx = x - 32;
  const dy = y - 32;
  const distance = Math.hypot(dx, dy);
  if (distance <= 5.5) return DOT;
  const angle = (Math.atan2(dy, dx) * 180) / Math.PI;
  if (Math.abs(distance - 17) <= 2.75 && !(angle > -40 && angle < 0)) return WHITE;
  if (inTriangle(x, y, [40.5, 14.5], [49.5, 19.5], [41, 25.5])) return WHITE;
  const t = (x + y) / 128;
  return [0, 1, 2].map((channel) => DARK[channel]! + (LIGHT[channel]! - DARK[channel]!) * t) as Rgb;
}

function inTriangle(x: number, y: number, a: number[], b: number[], c: number[]): boolean {
  const side = (p: number[], q: number[]) => (q[0]! - p[0]!) * (y - p[1]!) - (q[1]! - p[1]!) * (x - p[0]!);
  const s1 = side(a, b);
  const s2 = side(b, c);
  const s3 = side(c, a);
  return (s1 >= 0 && s2 >= 0 && s3 >= 0) || (s1 <= 0 && s2 <= 0 && s3 <= 0);
}

function drawIcon(size: number): Uint8Array {
  const samples = 3;
  const rows = Buffer.alloc(size * (size * 3 + 1));
  for (let py = 0; py < size; py += 1) {
    const row = py * (size * 3 + 1);
    rows[row] = 0; // filter: none
    for (let px = 0; px < size; px += 1) {
      const sum = [0, 0, 0];
      for (let sy = 0; sy < samples; sy += 1) {
        for (let sx = 0; sx < samples; sx += 1) {
          const colour = shade(((px + (sx + 0.5) / samples) / size) * 64, ((py + (sy + 0.5) / samples) / size) * 64);
          for (let channel = 0; channel < 3; channel += 1) sum[channel]! += colour[channel]!;
        }
      }
      for (let channel = 0; channel < 3; channel += 1) rows[row + 1 + px * 3 + channel] = Math.round(sum[channel]! / (samples * samples));
    }
  }
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header.set([8, 2, 0, 0, 0], 8); // 8-bit RGB, no interlace
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", header), chunk("IDAT", deflateSync(rows)), chunk("IEND", Buffer.alloc(0))]);
}

function chunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, "ascii"), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([length, body, crc]);
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k += 1) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes: Buffer): number {
  let crc = 0xffffffff;
  for (const byte of bytes) crc = CRC_TABLE[(crc ^ byte) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}
