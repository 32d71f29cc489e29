/// <reference types="vite/client" />
/**
 * The app works offline after its first visit: a service worker (public/sw.js, its precache list written at
 * build time by the `precache` plugin in vite.config.ts) keeps the app shell — page, scripts, the worker
 * bundle and sqlite's .wasm. The agent's history is in OPFS already. Not in the dev server: its modules are
 * not the built files.
 */
export function registerServiceWorker(): void {
  if (!import.meta.env.PROD || !("serviceWorker" in navigator)) return;
  navigator.serviceWorker.register(new URL("sw.js", document.baseURI), { scope: "./" }).catch((error: unknown) => {
    console.warn("The service worker was not registered; the app will need the network.", error);
  });
}
