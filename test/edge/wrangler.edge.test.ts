import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import * as worker from "../../examples/counter-object.ts";

/** wrangler.jsonc is JSON with comments (no trailing commas in ours). */
function wranglerConfig() {
  const text = readFileSync(new URL("../../wrangler.jsonc", import.meta.url), "utf8").replace(/^\s*\/\/.*$/gm, "");
  return JSON.parse(text) as {
    main: string;
    durable_objects: { bindings: Array<{ name: string; class_name: string }> };
    migrations: Array<{ new_sqlite_classes?: string[] }>;
  };
}

describe("the deployable wrangler configuration", () => {
  it("binds every Durable Object class its Worker exports, each as a SQLite-backed class", () => {
    const config = wranglerConfig();
    expect(config.main).toBe("examples/counter-object.ts");
    const classes = config.durable_objects.bindings.map((binding) => binding.class_name);
    for (const name of classes) expect(typeof (worker as Record<string, unknown>)[name], name).toBe("function");
    expect(config.migrations.flatMap((migration) => migration.new_sqlite_classes ?? [])).toEqual(classes);
    expect(config.durable_objects.bindings.map((binding) => binding.name)).toEqual(["COUNTER"]); // the name the Worker routes to
  });
});
