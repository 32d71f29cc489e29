import { type Child, h } from "./dom.ts";

/**
 * A small markdown subset for model answers — paragraphs, fenced code, bullet and numbered lists, headings,
 * `code`, **bold**, *italic* — built from DOM nodes with text content only. Nothing in the source is ever
 * parsed as HTML, so markup in an answer stays visible text. Links are shown as text, not followed.
 */
export function renderMarkdown(source: string): DocumentFragment {
  const fragment = document.createDocumentFragment();
  const lines = source.replace(/\r\n?/g, "\n").split("\n");
  let index = 0;
  while (index < lines.length) {
    const line = lines[index]!;
    const fence = /^\s*(```|~~~)/.exec(line);
    if (fence) {
      const body: string[] = [];
      index += 1;
      while (index < lines.length && !lines[index]!.trimStart().startsWith(fence[1]!)) body.push(lines[index++]!);
      index += 1; // the closing fence (or the end of a still-streaming answer)
      fragment.append(h("pre", { class: "md-code" }, h("code", null, body.join("\n"))));
      continue;
    }
    if (line.trim() === "") {
      index += 1;
      continue;
    }
    const heading = /^(#{1,4})\s+(.*)$/.exec(line);
    if (heading) {
      fragment.append(h("p", { class: `md-heading md-h${heading[1]!.length}` }, inline(heading[2]!)));
      index += 1;
      continue;
    }
    const bullet = /^\s*[-*+]\s+/;
    const numbered = /^\s*\d+[.)]\s+/;
    if (bullet.test(line) || numbered.test(line)) {
      const pattern = bullet.test(line) ? bullet : numbered;
      const list = h(pattern === bullet ? "ul" : "ol", { class: "md-list" });
      while (index < lines.length && pattern.test(lines[index]!)) list.append(h("li", null, inline(lines[index++]!.replace(pattern, ""))));
      fragment.append(list);
      continue;
    }
    const paragraph: string[] = [];
    const startsBlock = (text: string) => /^\s*(```|~~~)/.test(text) || /^#{1,4}\s/.test(text) || bullet.test(text) || numbered.test(text);
    while (index < lines.length && lines[index]!.trim() !== "" && !startsBlock(lines[index]!)) {
      paragraph.push(lines[index++]!);
    }
    const children: Child[] = [];
    paragraph.forEach((text, at) => {
      children.push(...(at > 0 ? [h("br")] : []), ...inline(text));
    });
    fragment.append(h("p", null, children));
  }
  return fragment;
}

/** `code`, **bold** and *italic* inside a line; everything else is plain text. */
function inline(text: string): Child[] {
  const parts: Child[] = [];
  const pattern = /`([^`]+)`|\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*/g;
  let last = 0;
  for (let match = pattern.exec(text); match; match = pattern.exec(text)) {
    if (match.index > last) parts.push(text.slice(last, match.index));
    if (match[1] !== undefined) parts.push(h("code", null, match[1]));
    else if (match[2] !== undefined) parts.push(h("strong", null, match[2]));
    else parts.push(h("em", null, match[3]!));
    last = match.index + match[0].length;
  }
  if (last < text.length) parts.push(text.slice(last));
  return parts;
}
