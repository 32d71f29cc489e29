/** The follow tests' sockets (test/edge/follow*.edge.test.ts): a tab's follow link to an object, and waiting. */
import type { FollowLink } from "../../src/follow/link-client.ts";
import { type Edge, pause } from "./support.ts";

interface Socket {
  send(frame: string): void;
  close(): void;
}

/** A follow link to object `name` as `caller`, reconnecting 100 ms after each close until `stop()`. */
export function followSocket(edge: Edge, name: string, caller: string, link?: FollowLink) {
  let socket: Socket | undefined;
  let stopped = false;
  const received: string[] = [];
  const open = () => {
    void edge.call("follow", name, "/follow", { headers: { Upgrade: "websocket", "x-caller": caller } }).then((response) => {
      const ws = (response as unknown as { webSocket?: any }).webSocket;
      if (!ws) return void setTimeout(() => !stopped && open(), 100);
      ws.accept();
      ws.addEventListener("message", (event: { data: unknown }) => {
        received.push(String(event.data));
        link?.receive(String(event.data));
      });
      ws.addEventListener("close", () => {
        socket = undefined;
        link?.disconnected();
        if (!stopped) setTimeout(open, 100);
      });
      socket = ws;
      link?.connected();
    });
  };
  open();
  return {
    received,
    send: (frame: string) => {
      if (!socket) throw new Error("the follow socket is not open");
      socket.send(frame);
    },
    get open() {
      return socket !== undefined;
    },
    stop() {
      stopped = true;
      socket?.close();
    },
  };
}

export async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, tries = 400): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    await pause(25);
  }
  throw new Error(`never: ${what}`);
}
