import { mergeStreaming, type ConversationViewUpdate, type StreamingView, type ViewUpdateListener } from "./view.ts";

/** Calls `callback` once at the next frame (a page's animation frame, about 16 ms). */
export type RequestFrame = (callback: () => void) => void;

/**
 * Coalesces a view subscription for a far side (a page across `postMessage`, a WebSocket): snapshots and
 * commits pass at once and in order, live updates wait for the next frame and only the newest of each part
 * (the answer, each tool's output) is sent — at most one live message per frame, however fast tokens come.
 * A live frame that a commit overtook is harmless: the page's store drops what the commit covers.
 */
export function coalesceLiveFrames(send: ViewUpdateListener, requestFrame: RequestFrame): ViewUpdateListener {
  let pending: StreamingView | undefined;
  const flush = () => {
    const frame = pending;
    pending = undefined;
    if (frame) send({ type: "live", ...frame });
  };
  return (update: ConversationViewUpdate) => {
    if (update.type !== "live") {
      send(update);
      return;
    }
    const { type: _type, ...streaming } = update;
    if (!pending) requestFrame(flush);
    pending = mergeStreaming(pending, streaming);
  };
}
