/**
 * SHA-256 (FIPS 180-4) of a text's UTF-8 bytes, in plain TypeScript (decision 0053): the same function on every
 * platform and at both ends of a follow link, synchronous, with no platform API to inject (`crypto.subtle` is
 * asynchronous and not the core's to import). It checks that a snapshot's joined parts are the whole the object
 * serialized — not a defence against the object itself, which vouches for its own copy.
 *
 * ```ts
 * sha256Text("abc"); // "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
 * ```
 */

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be,
  0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa,
  0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85,
  0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3,
  0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f,
  0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

/** Characters of text encoded at a time (a slice never ends between the two halves of a surrogate pair). */
const SLICE = 1 << 20;

/** The SHA-256 of `text`'s UTF-8 bytes, as 64 lowercase hex digits. */
export function sha256Text(text: string): string {
  const hash = new TextSha256();
  hash.update(text);
  return hash.hex();
}

/**
 * An incremental SHA-256 of a text given in pieces, in order (decision 0079): the same digest as `sha256Text` of the
 * pieces joined, even where a piece ends between the two halves of a surrogate pair (the high half is held back
 * until the next piece, so neither half is encoded alone as U+FFFD).
 */
export class TextSha256 {
  readonly #hash = new Sha256();
  readonly #encoder = new TextEncoder();
  #held = "";

  update(piece: string): void {
    const text = this.#held + piece;
    let end = text.length;
    const last = text.charCodeAt(end - 1);
    this.#held = last >= 0xd800 && last <= 0xdbff ? text.slice(end - 1) : "";
    if (this.#held) end--;
    for (let at = 0; at < end; ) {
      let stop = Math.min(end, at + SLICE);
      const before = text.charCodeAt(stop - 1);
      if (stop < end && before >= 0xd800 && before <= 0xdbff) stop++;
      this.#hash.update(this.#encoder.encode(text.slice(at, stop)));
      at = stop;
    }
  }

  hex(): string {
    if (this.#held) this.#hash.update(this.#encoder.encode(this.#held));
    this.#held = "";
    return this.#hash.hex();
  }
}

/** An incremental SHA-256: `update` with bytes in order, then `hex` once. */
export class Sha256 {
  readonly #state = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  readonly #block = new Uint8Array(64);
  readonly #words = new Uint32Array(64);
  #filled = 0;
  #length = 0;

  update(bytes: Uint8Array): void {
    this.#length += bytes.length;
    let at = 0;
    if (this.#filled > 0) {
      const take = Math.min(64 - this.#filled, bytes.length);
      this.#block.set(bytes.subarray(0, take), this.#filled);
      this.#filled += take;
      at = take;
      if (this.#filled < 64) return;
      this.#compress(this.#block, 0);
      this.#filled = 0;
    }
    for (; at + 64 <= bytes.length; at += 64) this.#compress(bytes, at);
    this.#block.set(bytes.subarray(at), 0);
    this.#filled = bytes.length - at;
  }

  hex(): string {
    const bits = this.#length * 8;
    const tail = new Uint8Array((this.#filled < 56 ? 64 : 128) - this.#filled);
    tail[0] = 0x80;
    const view = new DataView(tail.buffer);
    view.setUint32(tail.length - 8, Math.floor(bits / 0x1_0000_0000));
    view.setUint32(tail.length - 4, bits >>> 0);
    this.update(tail);
    return Array.from(this.#state, (word) => word.toString(16).padStart(8, "0")).join("");
  }

  #compress(bytes: Uint8Array, at: number): void {
    const w = this.#words;
    for (let i = 0; i < 16; i++) {
      const j = at + i * 4;
      w[i] = (bytes[j]! << 24) | (bytes[j + 1]! << 16) | (bytes[j + 2]! << 8) | bytes[j + 3]!;
    }
    for (let i = 16; i < 64; i++) {
      const a = w[i - 15]!;
      const b = w[i - 2]!;
      const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
      const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
      w[i] = (w[i - 16]! + s0 + w[i - 7]! + s1) | 0;
    }
    const s = this.#state;
    let a = s[0]!,
      b = s[1]!,
      c = s[2]!,
      d = s[3]!,
      e = s[4]!,
      f = s[5]!,
      g = s[6]!,
      h = s[7]!;
    for (let i = 0; i < 64; i++) {
      const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const t1 = (h + S1 + ((e & f) ^ (~e & g)) + K[i]! + w[i]!) | 0;
      const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      h = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) | 0;
    }
    s[0] = (s[0]! + a) | 0;
    s[1] = (s[1]! + b) | 0;
    s[2] = (s[2]! + c) | 0;
    s[3] = (s[3]! + d) | 0;
    s[4] = (s[4]! + e) | 0;
    s[5] = (s[5]! + f) | 0;
    s[6] = (s[6]! + g) | 0;
    s[7] = (s[7]! + h) | 0;
  }
}
