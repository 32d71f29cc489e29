/**
 * A host whose storage a rebuild replaces (the harness is opened again on it), optionally without one conversation: the
 * watches of decision 0117 move to the new harness, or end when it lacks their conversation.
 */
import { createHost } from "../src/host/host.ts";
import { createRegistry, MemoryStorage, type Storage } from "../src/index.ts";
import { settle } from "./socket-support.ts";

export async function rebuildingHost() {
  let inner = new MemoryStorage();
  const storage = new Proxy({} as Storage, {
    get: (_, key) => {
      const value = (inner as unknown as Record<PropertyKey, unknown>)[key];
      return typeof value === "function" ? value.bind(inner) : value;
    },
  });
  let asked: (() => void) | undefined;
  let dropped: number | undefined;
  const host = createHost({
    database: "db",
    openStorage: async () => storage,
    harness: { registry: createRegistry(), resume: true },
    rebuild: {
      when: (listener) => void (asked = listener),
      run: async () => {
        const image = JSON.parse(new TextDecoder().decode(await inner.exportImage())) as {
          conversations: Record<string, string>;
          entries: Record<string, string>;
        };
        delete image.conversations[String(dropped)];
        for (const [key, text] of Object.entries(image.entries))
          if ((JSON.parse(text) as { conversationId: number }).conversationId === dropped) delete image.entries[key];
        inner = MemoryStorage.fromImage(new TextEncoder().encode(JSON.stringify(image)));
      },
    },
    now: () => 0,
  });
  await host.ready;
  const rebuildWithout = async (id: number) => {
    dropped = id;
    const reopened = new Promise<void>((resolve) => {
      let opening = false;
      const stop = host.service.onStatus((status) => {
        if (status.kind === "opening") opening = true;
        else if (opening && status.kind === "ready") {
          queueMicrotask(() => stop());
          resolve();
        }
      });
    });
    asked!();
    await reopened;
    await settle();
  };
  return { host, rebuildWithout };
}
