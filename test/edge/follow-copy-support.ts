/** The copy tests' tab and devices (test/edge/follow-copy*.edge.test.ts): a tab that runs an agent, a device's page. */
import { counterTask } from "../../examples/counter-task.ts";
import { systemClock } from "../../src/base/clock.ts";
import { HarnessClient } from "../../src/browser/client.ts";
import { answerForwarded } from "../../src/follow/forwarding.ts";
import { FollowLink } from "../../src/follow/link-client.ts";
import { Mirror, remoteArbiter } from "../../src/follow/mirror.ts";
import { createRegistry, BACKGROUND_CONTEXT as ctx, defineExtension, Harness, type Json, memoryEnvs } from "../../src/index.ts";
import { openSqliteStorage } from "../../src/storage/sqlite/open-storage.ts";
import { answer, callTool, ScriptedModels } from "../agent-support.ts";
import { followSocket, until } from "./follow-support.ts";
import { type Edge, edgeSocket } from "./support.ts";
import { writeFileTool } from "./write-file-tool.ts";

/** A tab under the object's lease that runs an agent: its mirror pushes, its link answers the object's forwards. */
export async function openAgentTab(edge: Edge, name: string) {
  const link = new FollowLink({ clock: systemClock, send: (frame) => socket.send(frame), resendMs: 500 });
  const socket = followSocket(edge, name, "alice", link);
  const written: string[] = [];
  const forwards: string[] = [];
  /** The submissions' keys the tab was sent, by the object's forwards. */
  const requestIds = new Set<string>();
  /** While set, the tab holds its answers to forwards until it is resolved (a slow tab). */
  let gate: Promise<void> | undefined;
  const models = new ScriptedModels([callTool("write_file", { path: "a.txt" }, "call_1"), answer("wrote it")]);
  const registry = createRegistry().install(
    defineExtension({
      name: "example",
      tasks: [counterTask(() => {})],
      tools: [
        writeFileTool((path) => {
          written.push(path);
          return `wrote ${path}`;
        }),
      ],
    }),
  );
  const storage = await openSqliteStorage({ vfs: "memory" });
  await until("the follow socket opens", () => socket.open);
  const harness = await Harness.open(
    storage,
    { registry, models: models.api, env: memoryEnvs(), lease: { place: "tab", arbiter: remoteArbiter(link) } },
    ctx,
  );
  link.serve("forward", async (method, args) => {
    forwards.push(method);
    const requestId = method === "submit" ? (args[1] as { requestId?: string }).requestId : undefined;
    if (requestId) requestIds.add(requestId);
    await gate;
    return (await answerForwarded(harness, { method, args }, ctx)) as unknown as Json;
  });
  const mirror = new Mirror({ harness, link, clock: systemClock, resendMs: 500 });
  harness.resume();
  return {
    harness,
    mirror,
    socket,
    written,
    forwards,
    requestIds,
    hold(): () => void {
      let open!: () => void;
      gate = new Promise<void>((resolve) => (open = resolve));
      return () => {
        gate = undefined;
        open();
      };
    },
  };
}

/** A second device: a client of the object's page socket, as `caller`. */
export function openDevice(edge: Edge, name: string, caller = "bob") {
  return new HarnessClient({ url: `ws://edge/follow/${name}`, connect: () => edgeSocket(edge, "follow", name, { "x-caller": caller }) });
}
