import { serialize } from "node:v8";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { claimedThroughFollow, keepClaimedPages } from "../src/cloudflare/follow.ts";
import type { DurableObjectState, HibernatableWebSocket } from "../src/cloudflare/types.ts";
import { provisionOf } from "../src/host/page-tools.ts";

// Decision 0152 (0051): a follow socket keeps the pages that claimed through it in its attachment, which workerd
// refuses past 2 KB of V8's serialization (modelled here with node's, the same serializer). Each provision claims as
// a page of its own (`provisionOf`), so a tab's provisions are kept under its page id once.

function followSocket(caller: unknown) {
  let attachment: unknown = { version: 1, follow: true, caller, following: true, place: `tab-${crypto.randomUUID()}` };
  const socket = {
    serializeAttachment(value: unknown) {
      if (serialize(value).length > 2048) throw new Error("attachment too large");
      attachment = structuredClone(value);
    },
    deserializeAttachment: () => structuredClone(attachment),
    setAttachment: (value: unknown) => void (attachment = value),
  };
  const ctx = { getWebSockets: () => [socket] } as unknown as DurableObjectState;
  return { socket: socket as unknown as HibernatableWebSocket & typeof socket, ctx };
}

const CALLER = { userId: `user-${crypto.randomUUID()}`, roles: ["member"], org: `org-${crypto.randomUUID()}` };

describe("the pages kept with a follow socket (decision 0152)", () => {
  it("S8: 40 provisions of one tab holding claims all fit (35 did as whole ids): none is released at the next instance", () => {
    const page = `page-${crypto.randomUUID()}`;
    const provisions = Array.from({ length: 40 }, () => provisionOf(page));
    const { socket, ctx } = followSocket(CALLER);
    keepClaimedPages(socket, provisions);
    expect(new Set(claimedThroughFollow(ctx))).toEqual(new Set(provisions));
  });

  it("S8: provisions of several pages and plain page ids are read back as they were kept; an earlier attachment's `pages` still reads", () => {
    const pages = [provisionOf("page-a"), "page-plain", provisionOf("page-b"), provisionOf("page-a"), provisionOf("with~tilde")];
    const { socket, ctx } = followSocket(CALLER);
    keepClaimedPages(socket, pages);
    expect(new Set(claimedThroughFollow(ctx))).toEqual(new Set(pages));
    socket.setAttachment({ version: 1, follow: true, caller: CALLER, pages: ["page-old~12345678"] });
    expect(claimedThroughFollow(ctx)).toEqual(["page-old~12345678"]);
  });

  it("S8 (fast-check): whatever the ids, what is read back is the newest of them, all when they fit", () => {
    fc.assert(
      fc.property(fc.array(fc.string({ maxLength: 60 }), { maxLength: 80 }), (ids) => {
        const pages = [...new Set(ids)];
        const { socket, ctx } = followSocket({ user: "u" });
        keepClaimedPages(socket, pages);
        const read = new Set(claimedThroughFollow(ctx));
        expect(read).toEqual(new Set(pages.slice(pages.length - read.size)));
        if (serialize(pages).length < 1500) expect(read.size).toBe(pages.length);
      }),
      { numRuns: 100 },
    );
  });
});
