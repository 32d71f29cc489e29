import { expect, type Page, test } from "@playwright/test";

const url = () => process.env.REACT_CHAT_URL!;
const users = (page: Page) => page.locator('ol[aria-label="messages"] > li[data-role="user"]');
const assistants = (page: Page) => page.locator('ol[aria-label="messages"] > li[data-role="assistant"]');
const tool = (page: Page) => assistants(page).locator("pre.tool");

async function open(page: Page): Promise<void> {
  await page.goto(url());
  await expect(page.getByTestId("status")).toHaveText("ready");
  await expect(page.getByRole("button", { name: "Send" })).toBeEnabled();
}

async function send(page: Page, text: string): Promise<void> {
  await page.getByRole("textbox", { name: "message" }).fill(text);
  await page.getByRole("button", { name: "Send" }).click();
}

/** Asks for a note and reloads while the call waits; resolves once the reloaded page shows the card again. */
async function askAndReload(page: Page): Promise<void> {
  await send(page, "add a note please");
  await expect(tool(page)).toHaveAttribute("data-state", "approval-requested", { timeout: 20_000 });
  await expect(tool(page)).toContainText('add_note: {"text":"buy milk"} waits for your decision');
  // The answer stopped at the request, as the AI SDK's own does: useChat is ready, the person decides.
  await expect(page.getByTestId("chat-status")).toHaveText("ready");
  await page.reload();
  await expect(page.getByTestId("status")).toHaveText("ready");
  await expect(tool(page)).toHaveAttribute("data-state", "approval-requested", { timeout: 20_000 });
  await expect(page.getByTestId("chat-status")).toHaveText("ready");
  await expect(assistants(page)).toContainText("I will ask you first.");
  await expect(page.getByRole("list", { name: "tasks" })).toContainText("pi.tool sleeping");
}

test.beforeEach(async ({ page }) => open(page));

test("§4c useChat's approval flow across a reload: the call is back on its message as approval-requested, Approve runs the tool once, the answer shows", async ({
  page,
}) => {
  await askAndReload(page);
  await page.getByRole("button", { name: "Approve" }).click();
  await expect(tool(page)).toHaveAttribute("data-state", "output-available", { timeout: 20_000 });
  // The tool answers with the whole file: one line, so it ran once.
  await expect(tool(page)).toHaveText('add_note: notes.txt reads: "buy milk\\n"');
  await expect(assistants(page)).toContainText('Noted. notes.txt reads: "buy milk\\n"', { timeout: 20_000 });
  await expect(page.getByTestId("chat-status")).toHaveText("ready");
  await expect(page.getByRole("button", { name: "Approve" })).toHaveCount(0);
  await expect(page.getByTestId("chat-error")).toHaveCount(0);

  // Another reload shows it as it was: decided once, applied once, each message once.
  await page.reload();
  await expect(page.getByTestId("status")).toHaveText("ready");
  await expect(tool(page)).toHaveText('add_note: notes.txt reads: "buy milk\\n"');
  await expect(assistants(page)).toContainText("Noted.");
  await expect(users(page)).toHaveCount(1);
  await expect(assistants(page)).toHaveCount(1);
  await expect(page.getByRole("list", { name: "tasks" })).not.toContainText("pi.tool sleeping");
});

test("§4c a denial after a reload: the part is output-denied with its reason, the model's answer follows, the tool never runs", async ({
  page,
}) => {
  await askAndReload(page);
  await page.getByRole("button", { name: "Deny" }).click();
  await expect(tool(page)).toHaveAttribute("data-state", "output-denied", { timeout: 20_000 });
  await expect(tool(page)).toHaveText("add_note: denied (not now)");
  await expect(assistants(page)).toContainText("No note: ", { timeout: 20_000 });
  await expect(assistants(page)).toContainText("the person denied it (reason: not now)");
  await page.reload();
  await expect(page.getByTestId("status")).toHaveText("ready");
  await expect(tool(page)).toHaveText("add_note: denied (not now)");
  await expect(assistants(page)).toHaveCount(1);
});
