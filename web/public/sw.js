// The demo app's service worker: it caches the app shell at install, so the app (and, from OPFS, its agent
// history) loads without a network. The build replaces PRECACHE and VERSION (see vite.config.ts); each
// build gets its own cache, and the old ones are dropped when the new worker takes over.
const PRECACHE = /* precache */ [];
const VERSION = /* version */ "dev";
const CACHE = `pi-durable-web-${VERSION}`;
const scope = new URL(self.registration.scope);
const shell = new Set(PRECACHE.map((path) => new URL(path, scope).href));
const INDEX = new URL("index.html", scope).href;

self.addEventListener("install", (event) => {
  event.waitUntil(
    caches
      .open(CACHE)
      .then((cache) => cache.addAll([...shell]))
      .then(() => self.skipWaiting()),
  );
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches
      .keys()
      .then((keys) => Promise.all(keys.filter((key) => key.startsWith("pi-durable-web-") && key !== CACHE).map((key) => caches.delete(key))))
      .then(() => self.clients.claim()),
  );
});

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET") return;
  const url = new URL(request.url);
  // The app's own page ("/", "/?paused", "/index.html"): the network first, so a new build shows at once;
  // the cached page when offline.
  if (request.mode === "navigate" && (url.href.split(/[?#]/)[0] === scope.href || url.href.split(/[?#]/)[0] === INDEX)) {
    event.respondWith(
      fetch(request).catch(() => caches.open(CACHE).then((cache) => cache.match(INDEX)).then((response) => response ?? Response.error())),
    );
    return;
  }
  // Built assets have content hashes in their names: the cache first. Anything else is not ours.
  const key = url.href.split(/[?#]/)[0];
  if (shell.has(key)) {
    event.respondWith(caches.open(CACHE).then((cache) => cache.match(key)).then((cached) => cached ?? fetch(request)));
  }
});
