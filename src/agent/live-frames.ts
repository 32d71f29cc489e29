import { type ConversationViewUpdate, mergeStreaming, type StreamingView, type ViewUpdateListener } from "./view.ts";

/** Calls `callback` once at the next frame (a page's animation frame, about 16 ms). */
export type RequestFrame = (callback: () => void) => void;

/**
 * Coalesces a view subscription for a far side (a page across `postMessage`, a WebSocket): snapshots and
 * commits pass at once and in order; live updates go out at most one per frame. A live update that finds
 * the line idle goes at once (no added latency), and the frame after it is a cooldown: what arrives in it
 * is merged, only the newest of each part (the answer, each tool's output) kept, and sent when it ends.
 * A live frame that a commit overtook is harmless: the page's store drops what the commit covers.
 */
export function coalesceLiveFrames(send: ViewUpdateListener, requestFrame: RequestFrame): ViewUpdateListener {
  let cooling = false;
  let pending: StreamingView | undefined;
  const frameEnded = () => {
    const frame = pending;
    pending = undefined;
    if (!frame) {
      cooling = false;
      return;
    }
    send({ type: "live", ...frame });
    requestFrame(frameEnded); // the next frame is a cooldown again
  };
  return (update: ConversationViewUpdate) => {
    if (update.type !== "live") {
      send(update);
      return;
    }
    if (cooling) {
      const { type: _type, ...streaming } = update;
      pending = mergeStreaming(pending, streaming);
      return;
    }
    cooling = true;
    send(update);
    requestFrame(frameEnded);
  };
}
