import type { HarnessStatus } from "pi-durable-web/client";
import { app } from "./app.ts";
import { byId } from "./dom.ts";
import { type Move, type PageMode, placeOf } from "./place-text.ts";

export { runsPhrase } from "./place-text.ts";

/** The place bar's DOM (what it says: `place-text.ts`). */
const search = new URLSearchParams(location.search);
export const pageMode: PageMode = search.has("follow") ? "follow" : search.has("edge") ? "edge" : "tab";

const MOVE_LABELS: Record<Move, { idle: string; busy: string }> = {
  leave: { idle: "Move to the Durable Object", busy: "Moving to the Durable Object…" },
  runHere: { idle: "Run here", busy: "Taking the lease back…" },
  retryRebuild: { idle: "Try the rebuild again", busy: "Rebuilding from the Durable Object…" },
};

const bar = byId("place-bar");
const whereElement = byId("place-where");
const epochElement = byId("place-epoch");
const noteElement = byId("place-note");
const moveButton = byId<HTMLButtonElement>("place-move");
/** The move under way (its button stays busy until the call settles). */
let moving: Move | undefined;

function render(status: HarnessStatus): void {
  const place = placeOf(pageMode, status);
  bar.dataset.place = place.key;
  bar.dataset.mode = pageMode;
  whereElement.textContent = place.where;
  epochElement.hidden = place.epoch === undefined;
  epochElement.textContent = place.epoch === undefined ? "" : `lease epoch ${place.epoch}`;
  noteElement.textContent = place.note;
  const move = moving ?? place.move;
  moveButton.hidden = move === undefined;
  if (!move) return;
  moveButton.dataset.move = move;
  moveButton.textContent = MOVE_LABELS[move][moving ? "busy" : "idle"];
  moveButton.disabled = moving !== undefined;
}

moveButton.addEventListener("click", () => {
  const move = moveButton.dataset.move as Move | undefined;
  if (!move || moving) return;
  const client = app.client;
  moving = move;
  render(app.status);
  const call = move === "leave" ? client.leave() : move === "runHere" ? client.runHere() : client.retryRebuild();
  void call
    .catch((error) =>
      app.showError(error, move === "leave" ? "moving to the Durable Object" : move === "runHere" ? "run here" : "rebuilding"),
    )
    .finally(() => {
      moving = undefined;
      render(app.status);
    });
});

app.onStatus(render);
