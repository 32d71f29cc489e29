/// <reference lib="webworker" />
/**
 * The demo app's service worker (built by vite-plugin-pwa, injectManifest). Workbox precaches this build's
 * files by revision: after a new build only the files whose content changed are fetched again (hashed names
 * change with their content; index.html and the rest carry a revision). The new worker waits until the page
 * says "update" (web/src/offline.ts shows the prompt), then takes over and the page reloads.
 */
import { clientsClaim } from "workbox-core";
import { cleanupOutdatedCaches, createHandlerBoundToURL, precacheAndRoute } from "workbox-precaching";
import { NavigationRoute, registerRoute } from "workbox-routing";

declare const self: ServiceWorkerGlobalScope & { __WB_MANIFEST: Array<{ url: string; revision: string | null } | string> };

precacheAndRoute(self.__WB_MANIFEST);
cleanupOutdatedCaches();

// The app's own page, also with a query ("?paused"), from the precache: it loads with the network cut.
// Nothing else on the origin is ours (the e2e page lives beside it under /e2e/).
const scopePath = new URL(self.registration.scope).pathname.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
registerRoute(
  new NavigationRoute(createHandlerBoundToURL("index.html"), { allowlist: [new RegExp(`^${scopePath}(index\\.html)?(\\?.*)?$`)] }),
);

self.addEventListener("message", (event) => {
  if ((event.data as { type?: string } | null)?.type === "SKIP_WAITING") void self.skipWaiting();
});
// The first worker controls the page that installed it; a later one only after the page asked for it.
clientsClaim();
