import type { Row } from "pi-durable-web";
import { app } from "./app.ts";
import { conversation, onConversation } from "./conversation.ts";
import { byId, errorText, h } from "./dom.ts";

/**
 * The storage inspector: read-only SQL (the seed's queries one click away), results as a table, errors as
 * they come back (QueryNotReadOnly for anything that writes), the database file as a download, and the
 * conversation's OPFS files that the agent's tools work on.
 */
export const PRESETS: Record<string, string> = {
  counter: `SELECT id, status, record ->> '$.state.checkpoint.n' AS n, record ->> '$.memos' AS memos, record ->> '$.restarts' AS restarts FROM tasks WHERE kind = 'example.counter';`,
  probe: `SELECT id, status, record ->> '$.restarts' AS restarts, record ->> '$.state.checkpoint.phase' AS phase, record ->> '$.state.checkpoint.replay' AS replay, record ->> '$.state.outcome.status' AS outcome FROM tasks WHERE kind = 'pi.tool' AND record ->> '$.input.name' = 'probe' ORDER BY id;`,
  entries: `SELECT id, kind, record ->> '$.byTaskId' AS by_task, substr(record ->> '$.payload', 1, 160) AS payload FROM entries ORDER BY id DESC LIMIT 50;`,
  tables: `SELECT name, type FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name;`,
};

const sql = byId<HTMLTextAreaElement>("sql");
const table = byId<HTMLTableElement>("sql-result");
const errorBox = byId("sql-error");
const meta = byId("sql-meta");
sql.value = PRESETS.counter!;

function cell(value: unknown): HTMLTableCellElement {
  if (value === null || value === undefined) return h("td", { class: "null" }, "—");
  if (value instanceof Uint8Array) return h("td", { class: "blob" }, `blob (${value.byteLength} bytes)`);
  const text = String(value);
  return h("td", { class: typeof value === "number" ? "num" : text.length > 40 ? "long" : undefined }, text);
}

function showRows(rows: Row[]): void {
  const columns = [...new Set(rows.flatMap((row) => Object.keys(row)))];
  table.replaceChildren(
    h("thead", null, h("tr", null, ...columns.map((column) => h("th", { scope: "col" }, column)))),
    h("tbody", null, ...rows.map((row) => h("tr", null, ...columns.map((column) => cell(row[column]))))),
  );
}

async function run(): Promise<void> {
  const text = sql.value.trim();
  if (!text) return;
  errorBox.hidden = true;
  meta.textContent = "running…";
  try {
    const rows = await app.client.query(text);
    showRows(rows);
    meta.textContent = `${rows.length} row${rows.length === 1 ? "" : "s"}`;
  } catch (error) {
    const { name, message } = errorText(error);
    errorBox.hidden = false;
    errorBox.dataset.name = name;
    errorBox.textContent = `${name}: ${message}`;
    meta.textContent = "";
    table.replaceChildren();
  }
}

byId<HTMLFormElement>("sql-form").addEventListener("submit", (event) => {
  event.preventDefault();
  void run();
});
sql.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    void run();
  }
});
for (const button of document.querySelectorAll<HTMLButtonElement>("[data-preset]")) {
  button.addEventListener("click", () => {
    sql.value = PRESETS[button.dataset.preset!] ?? "";
    void run();
  });
}

byId("download-db").addEventListener(
  "click",
  app.attempt(async () => {
    const bytes = await app.client.exportDatabase();
    const url = URL.createObjectURL(new Blob([bytes as BlobPart], { type: "application/vnd.sqlite3" }));
    const link = h("a", { href: url, download: "pi-durable.sqlite3" });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  }, "download database"),
);

// ---- files ---------------------------------------------------------------------------------------------
const fileList = byId<HTMLUListElement>("files");
const fileContent = byId("file-content");
let openFile: string | undefined;

async function refreshFiles(): Promise<void> {
  const current = conversation();
  if (!current) return;
  let files: string[];
  try {
    files = await current.client.call<string[]>("files.list", current.id);
  } catch (error) {
    fileList.replaceChildren(h("li", { class: "muted" }, `Files are not available: ${errorText(error).message}`));
    return;
  }
  fileList.replaceChildren(
    ...(files.length === 0
      ? [h("li", { class: "muted" }, "No files yet. Ask the agent to write a note.")]
      : files.map((path) =>
          h("li", null, h("button", { class: "link", type: "button", "data-path": path, onclick: () => void showFile(path) }, path)),
        )),
  );
  if (openFile && files.includes(openFile)) await showFile(openFile);
  else fileContent.hidden = true;
}

async function showFile(path: string): Promise<void> {
  const current = conversation();
  if (!current) return;
  openFile = path;
  try {
    const text = await current.client.call<string>("files.read", current.id, path);
    fileContent.hidden = false;
    fileContent.dataset.path = path;
    fileContent.textContent = text;
  } catch (error) {
    fileContent.hidden = false;
    fileContent.textContent = `${errorText(error).name}: ${errorText(error).message}`;
  }
}

byId("files-refresh").addEventListener("click", () => void refreshFiles());
byId("tab-storage").addEventListener("click", () => void refreshFiles());
// Tool results change files: refresh after each one while the panel is open.
let lastResults = 0;
let counted: unknown;
onConversation((view) => {
  if (view.entries === counted) return; // a live frame: no new entries
  counted = view.entries;
  const results = view.entries.filter((entry) => entry.kind === "pi.tool-result").length;
  if (results !== lastResults) {
    lastResults = results;
    if (!byId("panel-storage").hidden) void refreshFiles();
  }
});
app.onReady(() => {
  lastResults = -1;
  counted = undefined;
  openFile = undefined;
  fileContent.hidden = true;
});
