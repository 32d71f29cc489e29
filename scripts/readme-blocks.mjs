/**
 * The ts/tsx code blocks of a Markdown file, as files a user would paste them into. A block whose first line
 * is a comment naming a file (`// src/worker.ts`, `// main.tsx — the page`) is that file; any other block is
 * `block-<line>.ts(x)` (the README line of its first code line). Each `##` section is a directory of its own,
 * so the blocks of one section can import each other by relative path (`./checklist`) while two sections may
 * both show a `worker.ts`.
 */
import { readFileSync } from "node:fs";

const FENCE = /^```(\w+)?\s*$/;
const NAMED = /^\/\/\s*([\w./-]+\.(?:ts|tsx))\b/;

/** @returns {{ section: string, file: string, line: number, lang: string, code: string }[]} `line`: the README line of the block's first code line */
export function readmeBlocks(path) {
  const lines = readFileSync(path, "utf8").split("\n");
  const blocks = [];
  let section = "top";
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index];
    const heading = /^##\s+(.*)$/.exec(line);
    if (heading) section = slug(heading[1]);
    const fence = FENCE.exec(line);
    if (!fence) continue;
    const start = index + 1;
    let end = start;
    while (end < lines.length && !/^```\s*$/.test(lines[end])) end++;
    const lang = fence[1] ?? "";
    if (lang === "ts" || lang === "tsx") {
      const code = lines.slice(start, end).join("\n");
      const named = NAMED.exec(lines[start] ?? "");
      const file = named ? named[1] : `block-${start + 1}.${lang}`;
      blocks.push({ section, file, line: start + 1, lang, code });
    }
    index = end;
  }
  return blocks;
}

function slug(title) {
  return (
    title
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, "-")
      .replace(/^-|-$/g, "") || "section"
  );
}
