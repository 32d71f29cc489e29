#!/usr/bin/env node
/**
 * README examples compile as pasted: every ts/tsx block of README.md becomes a file (scripts/readme-blocks.mjs
 * names it), importing the built package by its name (`pi-durable-web/...`, lib/ through node_modules, not the
 * source), and the whole set is type-checked with strict settings and `exactOptionalPropertyTypes`. Any error
 * fails, with the README line it comes from. Part of `npm test`.
 *
 * A block that continues an earlier one (it says so in a comment) uses that block's names: `client`, `storage`,
 * `registry`, `models`, `page`, … are declared once in readme-context.d.ts below, each as the type the earlier
 * block gives it. A name a block declares or imports itself shadows it. A block that imports the reader's own
 * module (`./my-extension.ts`) gets a small one from MODULES below; `./counter-task.ts` is the README's own
 * `src/counter-task.ts` block wherever a section imports it without that block, and the follow-mode Worker's
 * `./verify-token.ts` the signed-token block's `verifyToken`, exported.
 *
 *   node scripts/test-readme.mjs [README.md] [--no-build]
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { basename, dirname, join, relative, resolve } from "node:path";
import { readmeBlocks } from "./readme-blocks.mjs";

const root = new URL("..", import.meta.url).pathname;
const args = process.argv.slice(2);
const readme = resolve(args.find((arg) => !arg.startsWith("--")) ?? join(root, "README.md"));
// One folder per README checked, so a test of a README of its own never meets this one's files.
const out = join(root, ".tmp", `readme-check-${basename(readme, ".md")}`);

/** The names that later blocks continue from, typed as the earlier blocks make them. */
const CONTEXT = `// Names the README's earlier blocks define, for the blocks that continue them.
import type { Context } from "@earendil-works/chord/context";
import type { Models } from "@earendil-works/pi-ai";
import type { Page } from "@playwright/test";
import type { Harness, Registry } from "pi-durable-web";
import type { HarnessClient } from "pi-durable-web/client";
import type { SqliteStorage } from "pi-durable-web/storage/sqlite";

declare global {
  const ctx: Context;
  const storage: SqliteStorage;
  const harness: Harness;
  const registry: Registry;
  const models: Models;
  const client: HarnessClient;
  let page: Page;
  function render(...args: unknown[]): void;
  // From @cloudflare/workers-types (or \`wrangler types\`), which the Cloudflare block names.
  interface DurableObjectNamespace {
    idFromName(name: string): unknown;
    get(id: unknown): { fetch(request: Request): Promise<Response> };
  }
}
export {};
`;

/**
 * Sections whose blocks are files of an example that runs (examples/react-chat builds and tests them): each file
 * of the folder must be a block of the section, byte for byte.
 */
const RUN_IN = { "react-pi-durable-web-react": "examples/react-chat/src/readme" };

/** The modules README blocks import that are the reader's own, by file name. */
const MODULES = {
  "my-extension.ts": `import { defineExtension } from "pi-durable-web";\nexport const myExtension = defineExtension({ name: "mine" });\n`,
  "my-storage.ts": `import { MemoryStorage } from "pi-durable-web";\nexport class MyStorage extends MemoryStorage {}\n`,
  "my-app.ts": [
    `import { createRegistry, type Harness, type Registry } from "pi-durable-web";`,
    `import type { SweepWorld } from "pi-durable-web/testing";`,
    `export const registryFor = (_world: SweepWorld): Registry => createRegistry();`,
    `export async function ensureMyWork(_harness: Harness): Promise<void> {}`,
    "",
  ].join("\n"),
};

const TSCONFIG = {
  compilerOptions: {
    target: "ES2022",
    lib: ["ES2023", "DOM", "DOM.Iterable", "WebWorker"],
    module: "ESNext",
    moduleResolution: "bundler",
    moduleDetection: "force",
    verbatimModuleSyntax: true,
    allowImportingTsExtensions: true,
    noEmit: true,
    strict: true,
    exactOptionalPropertyTypes: true,
    noFallthroughCasesInSwitch: true,
    skipLibCheck: true,
    jsx: "react-jsx",
    types: [],
  },
  include: ["**/*.ts", "**/*.tsx"],
};

if (!args.includes("--no-build")) {
  const build = spawnSync("npm", ["run", "--silent", "build"], { cwd: root, stdio: "inherit" });
  if (build.status !== 0) process.exit(build.status ?? 1);
}

const blocks = readmeBlocks(readme);
rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, "node_modules"), { recursive: true });
// Installed as a package: imports of pi-durable-web/... resolve through its exports to lib/.
symlinkSync(root, join(out, "node_modules", "pi-durable-web"), "dir");
writeFileSync(join(out, "tsconfig.json"), `${JSON.stringify(TSCONFIG, null, 2)}\n`);
writeFileSync(join(out, "readme-context.d.ts"), CONTEXT);

/** file written → the README line its block starts on */
const origin = new Map();
for (const block of blocks) {
  const file = join(out, block.section, block.file);
  if (origin.has(file)) {
    console.error(`${relative(root, readme)}:${block.line}: a second block named ${block.file} in section "${block.section}".`);
    process.exit(1);
  }
  origin.set(file, block.line);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${block.code}\n`);
}

// The blocks an example runs are that example's files, unchanged.
if (readme === join(root, "README.md")) {
  for (const [section, folder] of Object.entries(RUN_IN)) {
    for (const name of readdirSync(join(root, folder))) {
      const block = blocks.find((candidate) => candidate.section === section && candidate.file === name);
      const file = readFileSync(join(root, folder, name), "utf8");
      if (!block || `${block.code}\n` !== file) {
        console.error(
          `README.md, section "${section}": ${block ? `the block at line ${block.line} differs from` : "no block is"} ${folder}/${name}; paste the file.`,
        );
        process.exit(1);
      }
    }
  }
}

// The follow-mode Worker's `./verify-token.ts` is the signed-token recipe's own verifyToken, exported.
const signed = blocks.find((block) => block.file === "signed-worker.ts")?.code ?? "";
const verify = /^async function verifyToken\(.*?^}$/ms.exec(signed)?.[0];
if (verify) MODULES["verify-token.ts"] = `export ${verify}\n`;
// `./counter-task.ts` is the README's own counter block (decision 0103): a reader pastes it from there, not from the
// repository's examples/, and each section that imports it compiles against that block.
const counter = blocks.find((block) => block.file === "src/counter-task.ts")?.code;
if (counter !== undefined) MODULES["counter-task.ts"] = `${counter}\n`;

// The reader's own modules, next to the blocks that import them.
for (const [file] of origin) {
  for (const [, name] of readFileSync(file, "utf8").matchAll(/from "\.\/([\w.-]+)"/g)) {
    const target = join(dirname(file), name);
    if (!existsSync(target) && MODULES[name] !== undefined) writeFileSync(target, MODULES[name]);
  }
}

const check = spawnSync("npx", ["--no-install", "tsc", "-p", join(out, "tsconfig.json"), "--pretty", "false"], {
  cwd: out,
  encoding: "utf8",
});
const output = `${check.stdout ?? ""}${check.stderr ?? ""}`;
if (check.status !== 0) {
  // file(line,col): error … → README.md:<line of the block + line - 1>: error …
  for (const message of output.split("\n").filter(Boolean)) {
    const where = /^(.+?)\((\d+),(\d+)\): (.*)$/.exec(message);
    const start = where ? origin.get(resolve(out, where[1])) : undefined;
    if (where && start !== undefined) {
      console.error(`${relative(root, readme)}:${start + Number(where[2]) - 1}:${where[3]}: ${where[4]}`);
    } else console.error(message);
  }
  console.error(`README code blocks: ${blocks.length} compiled, the errors above fail them.`);
  process.exit(1);
}
console.log(`README code blocks: ${blocks.length} ts/tsx blocks compile as pasted (strict, exactOptionalPropertyTypes).`);
