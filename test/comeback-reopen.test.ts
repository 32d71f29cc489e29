import { describe, expect, it } from "vitest";
import { ConnectionLost } from "../src/index.ts";
import { comebackWorld } from "./comeback-support.ts";
import { ctx } from "./support.ts";

// Review of 0135, L2: the test world's `reopenTab` ran the clock before anything handled its open, so an open that
// failed was an unhandled rejection (Vitest failed the file) besides this call's rejection.
describe("the comeback world's reopenTab", () => {
  it("an open that fails (its lease ask lost) is reopenTab's rejection, ConnectionLost, and nothing unhandled", async () => {
    const world = await comebackWorld({ to: 3, fate: (way) => (way === "toObject" ? "drop" : "deliver") });
    await world.tab.harness.close(ctx);
    world.loseFrames(); // from here every frame to the object is lost: the open's lease ask is never answered
    await expect(world.reopenTab()).rejects.toBeInstanceOf(ConnectionLost);
  });
});
