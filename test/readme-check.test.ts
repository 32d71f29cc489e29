import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const root = new URL("..", import.meta.url).pathname;

/** Runs scripts/test-readme.mjs on a README of its own (no build: these blocks import no package). */
function checkReadme(name: string, markdown: string): { status: number | null; output: string } {
  const dir = join(root, ".tmp", "readme-check-fixtures");
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${name}.md`);
  writeFileSync(path, markdown);
  const result = spawnSync("node", [join(root, "scripts", "test-readme.mjs"), path, "--no-build"], { cwd: root, encoding: "utf8" });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

const fence = (lang: string, code: string) => `\`\`\`${lang}\n${code}\n\`\`\`\n`;

describe("the README compile check (scripts/test-readme.mjs)", () => {
  it("passes blocks that compile, a named file importing another block of its section", () => {
    const markdown = [
      "# app\n\n## One\n",
      fence("ts", "// src/sum.ts\nexport const sum = (a: number, b: number): number => a + b;"),
      fence("ts", '// src/main.ts — uses the block above\nimport { sum } from "./sum.ts";\nconsole.log(sum(1, 2));'),
      fence("sh", "this is not TypeScript and is not compiled"),
    ].join("\n");
    const { status, output } = checkReadme("readme-good", markdown);
    expect(output).toContain("2 ts/tsx blocks compile");
    expect(status).toBe(0);
  }, 60_000);

  it("fails on a broken block and names the README line of the error", () => {
    const markdown = ["# app\n\n## One\n", fence("ts", 'const fine = 1;\nconst broken: number = "one";\nconsole.log(fine, broken);')].join(
      "\n",
    );
    const { status, output } = checkReadme("readme-broken", markdown);
    expect(status).toBe(1);
    // The fence is line 5 of this README, the block's second code line is line 7.
    expect(output).toMatch(/readme-broken\.md:7:7: error TS2322/);
  }, 60_000);

  it("compiles with exactOptionalPropertyTypes: an optional property given undefined fails", () => {
    const markdown = [
      "# app\n\n## One\n",
      fence("ts", "interface Options { retries?: number }\nconst options: Options = { retries: undefined };\nconsole.log(options);"),
    ].join("\n");
    const { status, output } = checkReadme("readme-optional", markdown);
    expect(status).toBe(1);
    expect(output).toContain("exactOptionalPropertyTypes");
  }, 60_000);
});
