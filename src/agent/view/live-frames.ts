import { LiveFrameEncoder } from "./live-delta.ts";
import { type ConversationViewUpdate, mergeStreaming, type StreamingView, type ViewUpdateListener } from "./view.ts";

/** How often live frames may go to a far side, on the host's clock and timer (a worker's `performance.now`, `setTimeout`). */
export interface LivePace {
  /** At most one live frame per this many ms: about one animation frame (16). */
  frameMs: number;
  /** A monotonic clock in ms. */
  now(): number;
  /** Calls `callback` once, `ms` from now. */
  setTimer(ms: number, callback: () => void): void;
}

/**
 * One subscription's updates for a far side (a page across `postMessage`, a WebSocket): snapshots and commits
 * pass at once and in order; live updates carry only what the far side does not have yet (LiveFrameEncoder)
 * and go out about one per `pace.frameMs`. A live update goes at once when the newest update of the last
 * frame arrived at least a frame before it; otherwise it waits for the rest of that frame, merged with what
 * else arrives (the newest of each part kept). The frame is counted from when its newest update arrived, not
 * from when a late timer sent it: at a model's steady pace near one chunk a frame, a frame that had to wait
 * does not make every later chunk wait too. Without a pace every live update goes at once. The delay sits
 * here alone: the page shows a frame as it arrives, and the browser paints it at its next frame.
 */
export function coalesceLiveFrames(send: ViewUpdateListener, pace?: LivePace): ViewUpdateListener {
  const encoder = new LiveFrameEncoder();
  /** When the newest update of the last frame sent arrived. */
  let lastFrame = -Infinity;
  let pending: { view: StreamingView; arrived: number } | undefined;
  const sendLive = (view: StreamingView, arrived: number) => {
    const frame = encoder.encode(view);
    if (!frame) return;
    lastFrame = arrived;
    send({ type: "live", ...frame });
  };
  const frameEnded = () => {
    const frame = pending;
    pending = undefined;
    if (frame) sendLive(frame.view, frame.arrived);
  };
  return (update: ConversationViewUpdate) => {
    if (update.type !== "live") {
      encoder.committed(update);
      send(update);
      return;
    }
    // A feed's live updates carry everything so far; what reaches the far side is the encoder's frame.
    const { type: _type, ...view } = update as { type: "live" } & StreamingView;
    if (!pace) return sendLive(view, 0);
    const now = pace.now();
    if (pending) {
      pending = { view: mergeStreaming(pending.view, view), arrived: now };
      return;
    }
    const wait = lastFrame + pace.frameMs - now;
    if (wait <= 0) return sendLive(view, now);
    pending = { view, arrived: now };
    pace.setTimer(wait, frameEnded);
  };
}
