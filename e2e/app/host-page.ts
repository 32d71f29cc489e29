import { connectHarness } from "../../src/browser/client.ts";
import * as errors from "../../src/errors.ts";
import "./host-api.ts";

window.hostE2e = {
  connect: (options = {}) =>
    connectHarness(new Worker(new URL("./harness-worker.ts", import.meta.url), { type: "module", name: JSON.stringify(options) })),
  connectUrl: (url) => connectHarness(url),
  errors,
  connectPageTools: () => connectHarness(new Worker(new URL("./page-tools-worker.ts", import.meta.url), { type: "module" })),
};
