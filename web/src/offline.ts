/// <reference types="vite/client" />
/// <reference types="vite-plugin-pwa/vanillajs" />
import { registerSW } from "virtual:pwa-register";
import { byId } from "./dom.ts";

/**
 * The app works offline after its first visit: the service worker (web/sw.ts, workbox via vite-plugin-pwa)
 * keeps the app shell — page, scripts, the worker bundle and sqlite's .wasm. The agent's history is in OPFS
 * already. When a new build is waiting, a banner offers the update; taking it reloads the tab, which is a
 * crash like any reload: the next load recovers. Not in the dev server: its modules are not the built files.
 */
let registration: ServiceWorkerRegistration | undefined;

export function registerServiceWorker(): void {
  if (!import.meta.env.PROD || !("serviceWorker" in navigator)) return;
  const banner = byId("update-banner");
  let reloading = false;
  const reloadOnce = () => {
    if (reloading) return;
    reloading = true;
    location.reload();
  };
  const update = registerSW({
    // workbox-window reloads only a page that was controlled when it registered; a first visit's page
    // (controlled later, by clientsClaim) reloads when the new worker takes control (below).
    onNeedReload: reloadOnce,
    onNeedRefresh() {
      banner.hidden = false;
      document.body.dataset.update = "waiting";
    },
    onOfflineReady() {
      document.body.dataset.offline = "ready";
    },
    onRegisteredSW(_url, registered) {
      registration = registered;
    },
    onRegisterError(error: unknown) {
      console.warn("The service worker was not registered; the app will need the network.", error);
    },
  });
  byId("banner-update").addEventListener("click", () => {
    navigator.serviceWorker.addEventListener("controllerchange", reloadOnce, { once: true });
    void update(true);
  });
  byId("banner-update-later").addEventListener("click", () => (banner.hidden = true));
}

/** Asks the browser to look for a new build now (it also does on each load). */
export async function checkForUpdate(): Promise<void> {
  await registration?.update();
}
