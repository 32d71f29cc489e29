import { describe, expect, it } from "vitest";
import { defineDocument, MemoryStorage } from "../src/index.ts";
import { ctx, openHarness } from "./support.ts";

const Counter = defineDocument<{ count: number; by?: string }>("app.counter", () => ({ count: 0 }));

describe("defineDocument", () => {
  it("reads the initial value until one is committed, then the committed value, also after a reopen", async () => {
    const storage = new MemoryStorage();
    const { harness } = await openHarness(storage);
    const root = await harness.root(ctx);
    const scope = `app:${root.id}`;
    const seen = await root.commit((tx) => {
      const before = Counter.read(tx, scope);
      Counter.write(tx, scope, { count: before.count + 1, by: "test" });
      return { before, staged: Counter.read(tx, scope) };
    }, ctx);
    expect(seen).toEqual({ before: { count: 0 }, staged: { count: 1, by: "test" } });
    await harness.close(ctx);

    const reopened = await openHarness(storage);
    const again = reopened.harness.conversation(root.id);
    expect(await again.commit((tx) => Counter.read(tx, scope), ctx)).toEqual({ count: 1, by: "test" });
    await again.commit((tx) => Counter.remove(tx, scope), ctx);
    expect(await again.commit((tx) => Counter.read(tx, scope), ctx)).toEqual({ count: 0 });
    await reopened.harness.close(ctx);
  });

  it("gives each read without a stored value its own initial value", () => {
    const empty = { document: () => undefined };
    const first = Counter.read(empty, "app");
    first.count = 5;
    expect(Counter.read(empty, "app")).toEqual({ count: 0 });
  });
});
