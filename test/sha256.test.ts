import { createHash } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { sha256Text } from "../src/base/sha256.ts";

// Decision 0053: the snapshot's digest is a pure SHA-256 in the core (the same at both ends, no platform API).

describe("sha256Text (decision 0053)", () => {
  it("FIPS 180-4's examples: the empty text, abc, and the two-block 448-bit message", () => {
    expect(sha256Text("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    expect(sha256Text("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(sha256Text("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")).toBe(
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
    );
  });

  it("property: any text (any Unicode, lengths around the block edges and past the 1 M-character slice) hashes as Node's crypto does its UTF-8 (fast-check)", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: "grapheme", maxLength: 300 }), fc.string({ unit: "binary", maxLength: 300 })), (text) => {
        expect(sha256Text(text)).toBe(createHash("sha256").update(text, "utf8").digest("hex"));
      }),
      { numRuns: 300 },
    );
    // A surrogate pair across the slice boundary stays whole.
    const across = `${"x".repeat((1 << 20) - 1)}🎉${"y".repeat(100)}`;
    expect(sha256Text(across)).toBe(createHash("sha256").update(across, "utf8").digest("hex"));
  });
});
