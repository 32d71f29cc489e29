import { parseDependencyTree } from "dpdm";
import { describe, expect, it } from "vitest";

/**
 * What a page loads (issue 26 item 2): the entries a page imports reach the protocol, the client and the
 * view code, never the kernel's write path. The session's commit line, its transactions and group commit,
 * the scheduler and the task transitions, and the storage adapters run only in the worker or the object.
 */
const PAGE_ENTRIES = ["src/browser/client.ts", "src/react/index.ts"];

const KERNEL_WRITE = [/^src\/session\/(session|tx|group)\.ts$/, /^src\/tasks\//, /^src\/storage\/(?!records\.ts$)/, /^src\/harness\.ts$/];

async function runtimeClosure(entry: string): Promise<string[]> {
  // transform: type-only imports are erased, as the bundler erases them.
  const tree = await parseDependencyTree(entry, { transform: true, skipDynamicImports: false, tsconfig: "tsconfig.json" });
  return Object.keys(tree).filter((file) => file.startsWith("src/"));
}

describe("the page's import closure (issue 26 item 2)", () => {
  for (const entry of PAGE_ENTRIES) {
    it(`${entry} loads no kernel write code`, async () => {
      const files = await runtimeClosure(entry);
      expect(files).toContain(entry); // the walk found the entry (an empty closure proves nothing)
      expect(files.length).toBeGreaterThan(5);
      expect(files.filter((file) => KERNEL_WRITE.some((pattern) => pattern.test(file)))).toEqual([]);
    });
  }

  it("the check sees kernel write code where it is (the worker entry reaches the session's commit line)", async () => {
    const files = await runtimeClosure("src/browser/worker.ts");
    expect(files).toContain("src/session/tx.ts");
    expect(files).toContain("src/tasks/scheduler.ts");
  });
});
