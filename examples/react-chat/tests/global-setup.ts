import { fileURLToPath } from "node:url";
import { serveStatic } from "../../../e2e/support/server.ts";

export default async function globalSetup(): Promise<() => Promise<void>> {
  const server = await serveStatic(fileURLToPath(new URL("../dist", import.meta.url)));
  process.env.REACT_CHAT_URL = server.url;
  return () => server.close();
}
